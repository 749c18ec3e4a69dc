package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The file as it is written. Optional scalars are pointers so that a value
// given explicitly (concurrency: 0) is told apart from one left out.
type fileSpec struct {
	Version *int       `yaml:"version"`
	Tools   []toolSpec `yaml:"tools"`
}

type toolSpec struct {
	Name        string       `yaml:"name"`
	Description *string      `yaml:"description"`
	InputSchema yaml.Node    `yaml:"input_schema"`
	Timeout     *string      `yaml:"timeout"`
	Retry       *retrySpec   `yaml:"retry"`
	Idempotent  *bool        `yaml:"idempotent"`
	Concurrency *int         `yaml:"concurrency"`
	PauseAbove  *string      `yaml:"pause_on_rate_limit_above"`
	Backend     string       `yaml:"backend"`
	Webhook     *webhookSpec `yaml:"webhook"`
	Exec        *execSpec    `yaml:"exec"`
}

type retrySpec struct {
	MaxAttempts *int     `yaml:"max_attempts"`
	BaseDelay   *string  `yaml:"base_delay"`
	MaxDelay    *string  `yaml:"max_delay"`
	Jitter      *float64 `yaml:"jitter"`
}

type webhookSpec struct {
	URL            string            `yaml:"url"`
	Headers        map[string]string `yaml:"headers"`
	MaxOutputBytes *int              `yaml:"max_output_bytes"`
}

type execSpec struct {
	Command        []string `yaml:"command"`
	Env            []string `yaml:"env"`
	Dir            *string  `yaml:"dir"`
	TermGrace      *string  `yaml:"term_grace"`
	MaxOutputBytes *int     `yaml:"max_output_bytes"`
}

// Parse checks the catalog in data; name is the file's name in errors and
// the base of relative exec paths. The format is YAML, or JSON (which the
// YAML parser reads too, with line numbers) when name ends in .json or the
// content starts with '{'.
func Parse(name string, data []byte, opts Options) (*File, error) {
	p := &parser{file: name, opts: opts.withDefaults()}
	return p.parse(data)
}

type parser struct {
	file  string
	opts  Options
	root  *yaml.Node   // the document's top mapping
	items []*yaml.Node // the tools' mappings, in order
	names []string     // the tools' names as far as known, for errors
}

func (p *parser) fail(line int, tool, field string, err error) *Error {
	return &Error{File: p.file, Line: line, Tool: tool, Field: field, Err: err}
}

func (p *parser) failf(line int, tool, field, format string, args ...any) *Error {
	return p.fail(line, tool, field, fmt.Errorf(format, args...))
}

func (p *parser) parse(data []byte) (*File, error) {
	trimmed := bytes.TrimSpace(data)
	ext := strings.ToLower(filepath.Ext(p.file))
	isJSON := ext == ".json" || ext != ".yaml" && ext != ".yml" && bytes.HasPrefix(trimmed, []byte("{"))
	if isJSON && !json.Valid(trimmed) {
		var se *json.SyntaxError
		if err := json.Unmarshal(trimmed, new(any)); errors.As(err, &se) {
			return nil, p.failf(lineAt(data, int(se.Offset)), "", "", "not valid JSON: %s", se.Error())
		}
		return nil, p.failf(0, "", "", "not valid JSON")
	}
	if len(trimmed) == 0 {
		return nil, p.failf(0, "", "", "the file is empty; it needs a list of tools under \"tools\"")
	}

	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, p.syntaxError(err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, p.failf(1, "", "", "must be a mapping with a list of tools under \"tools\"")
	}
	p.root = doc.Content[0]
	if _, tv := findKey(p.root, "tools"); tv != nil && tv.Kind == yaml.SequenceNode {
		for _, item := range tv.Content {
			p.items = append(p.items, item)
			name := ""
			if item.Kind == yaml.MappingNode {
				if _, nv := findKey(item, "name"); nv != nil && nv.Kind == yaml.ScalarNode {
					name = nv.Value
				}
			}
			p.names = append(p.names, name)
		}
	}

	var spec fileSpec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&spec); err != nil {
		return nil, p.decodeError(err)
	}
	if spec.Version != nil && *spec.Version != 1 {
		k, _ := findKey(p.root, "version")
		return nil, p.failf(lineOf(k), "", "version", "must be 1, the only version there is")
	}
	if len(spec.Tools) == 0 {
		k, _ := findKey(p.root, "tools")
		return nil, p.failf(lineOf(k), "", "tools", "lists no tools; give at least one")
	}

	f := &File{Path: p.file, opts: p.opts}
	seen := map[string]int{} // name → line
	for i := range spec.Tools {
		e, err := p.entry(i, &spec.Tools[i])
		if err != nil {
			return nil, err
		}
		if line, dup := seen[e.Name]; dup {
			k, _ := findKey(p.items[i], "name")
			return nil, p.failf(lineOf(k), e.Name, "name", "is already used by the tool at line %d; tool names must be unique", line)
		}
		seen[e.Name] = e.Line
		f.Entries = append(f.Entries, *e)
	}
	return f, nil
}

// toolLabel names tool i in errors: its name, or "#i" when it has none.
func (p *parser) toolLabel(i int) string {
	if i < len(p.names) && p.names[i] != "" {
		return p.names[i]
	}
	return "#" + strconv.Itoa(i+1)
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError rewrites a YAML syntax error with the file name.
func (p *parser) syntaxError(err error) *Error {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return p.failf(line, "", "", "not valid YAML: %s", m[2])
	}
	return p.failf(0, "", "", "not valid YAML: %s", strings.TrimPrefix(msg, "yaml: "))
}

var (
	typeErrLineRE = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownKeyRE  = regexp.MustCompile(`^field (\S+) not found in type `)
	wrongTypeRE   = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
	dupKeyRE      = regexp.MustCompile(`^mapping key "(.*)" already defined at line (\d+)$`)
)

// decodeError turns the first problem the strict decoder found into an
// *Error naming the tool and the field, without Go type names.
func (p *parser) decodeError(err error) *Error {
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		return p.syntaxError(err)
	}
	m := typeErrLineRE.FindStringSubmatch(te.Errors[0])
	if m == nil {
		return p.failf(0, "", "", "%s", te.Errors[0])
	}
	line, _ := strconv.Atoi(m[1])
	rest := m[2]
	tool, item := p.toolAtLine(line)
	var base *yaml.Node = p.root
	if item != nil {
		base = item
	}
	switch {
	case unknownKeyRE.MatchString(rest):
		key := unknownKeyRE.FindStringSubmatch(rest)[1]
		path := pathOfKey(base, line, key)
		if path == "" {
			path = key
		}
		hint := " (known keys: version, tools)"
		if item != nil {
			hint = knownKeysHint(path)
		}
		return p.failf(line, tool, path, "unknown key%s", hint)
	case wrongTypeRE.MatchString(rest):
		mm := wrongTypeRE.FindStringSubmatch(rest)
		path := pathOfValueAt(base, line)
		return p.failf(line, tool, path, "must be %s, not %s", goTypeWords(mm[3]), yamlValueWords(mm[1], mm[2]))
	case dupKeyRE.MatchString(rest):
		mm := dupKeyRE.FindStringSubmatch(rest)
		return p.failf(line, tool, "", "key %q appears twice (first at line %s)", mm[1], mm[2])
	}
	return p.failf(line, tool, "", "%s", rest)
}

// toolAtLine returns the label and mapping of the tool whose entry holds
// line, or "" and nil when line is outside every tool.
func (p *parser) toolAtLine(line int) (string, *yaml.Node) {
	found := -1
	for i, item := range p.items {
		if item.Line <= line && line <= lastLine(item) {
			found = i
		}
	}
	if found < 0 {
		return "", nil
	}
	return p.toolLabel(found), p.items[found]
}

// lastLine is the last line n or any node under it starts on.
func lastLine(n *yaml.Node) int {
	last := n.Line
	for _, c := range n.Content {
		last = max(last, lastLine(c))
	}
	return last
}

// knownKeys lists the keys of each part of a tool entry, for the hint of an
// unknown key.
var knownKeys = map[string]string{
	"":        "name, description, input_schema, timeout, retry, idempotent, concurrency, pause_on_rate_limit_above, backend, webhook, exec",
	"retry":   "max_attempts, base_delay, max_delay, jitter",
	"webhook": "url, headers, max_output_bytes",
	"exec":    "command, env, dir, term_grace, max_output_bytes",
}

func knownKeysHint(path string) string {
	parent := ""
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		parent = path[:i]
	}
	if keys, ok := knownKeys[parent]; ok {
		return " (known keys: " + keys + ")"
	}
	return ""
}

// goTypeWords says in words what a Go type of the spec expects.
func goTypeWords(t string) string {
	switch {
	case t == "int":
		return "an integer"
	case t == "float64":
		return "a number"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case t == "[]string":
		return "a list of strings"
	case strings.HasPrefix(t, "map["):
		return "a mapping of names to strings"
	case strings.HasPrefix(t, "[]"):
		return "a list of tools"
	}
	return "a mapping"
}

// yamlValueWords describes a YAML value the decoder refused.
func yamlValueWords(tag, value string) string {
	switch tag {
	case "seq":
		return "a list"
	case "map":
		return "a mapping"
	case "null":
		return "empty"
	}
	if len(value) > 40 {
		value = value[:40] + "…"
	}
	return strconv.Quote(value)
}

// findKey returns the key and value nodes of key in mapping m.
func findKey(m *yaml.Node, key string) (k, v *yaml.Node) {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// findPath follows a dotted path of keys from mapping m.
func findPath(m *yaml.Node, path string) (k, v *yaml.Node) {
	v = m
	for _, part := range strings.Split(path, ".") {
		k, v = findKey(v, part)
		if v == nil {
			return nil, nil
		}
	}
	return k, v
}

// lineOf is n's line, 0 for nil.
func lineOf(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

// pathOfKey returns the dotted path, from base, of the mapping key named key
// on line; "" when there is none. The keys of input_schema are not walked:
// the schema is free-form.
func pathOfKey(base *yaml.Node, line int, key string) string {
	var walk func(n *yaml.Node, prefix string) string
	walk = func(n *yaml.Node, prefix string) string {
		if n.Kind != yaml.MappingNode {
			return ""
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			path := joinPath(prefix, k.Value)
			if k.Line == line && k.Value == key {
				return path
			}
			if k.Value != "input_schema" {
				if got := walk(v, path); got != "" {
					return got
				}
			}
		}
		return ""
	}
	return walk(base, "")
}

// pathOfValueAt returns the dotted path, from base, of the value starting on
// line (list items as name[i]); "" when there is none.
func pathOfValueAt(base *yaml.Node, line int) string {
	var walk func(n *yaml.Node, prefix string) (string, bool)
	walk = func(n *yaml.Node, prefix string) (string, bool) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				path := joinPath(prefix, k.Value)
				if v.Line == line && (v.Kind == yaml.ScalarNode || k.Line == line) {
					return path, true
				}
				if got, ok := walk(v, path); ok {
					return got, true
				}
			}
		case yaml.SequenceNode:
			for i, v := range n.Content {
				path := prefix + "[" + strconv.Itoa(i) + "]"
				if v.Line == line && v.Kind == yaml.ScalarNode {
					return path, true
				}
				if got, ok := walk(v, path); ok {
					return got, true
				}
			}
		}
		return "", false
	}
	path, _ := walk(base, "")
	return path
}

func joinPath(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// lineAt is the 1-based line of byte offset off in data.
func lineAt(data []byte, off int) int {
	off = min(max(off, 0), len(data))
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// nodeJSON converts a YAML value (an input schema) to compact JSON, keeping
// the order of mapping keys and the text of numbers.
func nodeJSON(n *yaml.Node) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := writeNodeJSON(&buf, n, 0); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// jsonNumberRE is the grammar of a JSON number.
var jsonNumberRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

func writeNodeJSON(buf *bytes.Buffer, n *yaml.Node, depth int) error {
	if depth > 100 {
		return errors.New("is nested too deeply")
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			buf.WriteString("null")
			return nil
		}
		return writeNodeJSON(buf, n.Content[0], depth+1)
	case yaml.AliasNode:
		return writeNodeJSON(buf, n.Alias, depth+1)
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: a key must be a plain string", k.Line)
			}
			if k.Tag == "!!merge" {
				return fmt.Errorf("line %d: merge keys (<<) are not supported", k.Line)
			}
			if i > 0 {
				buf.WriteByte(',')
			}
			kb, _ := json.Marshal(k.Value)
			buf.Write(kb)
			buf.WriteByte(':')
			if err := writeNodeJSON(buf, v, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, v := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeNodeJSON(buf, v, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			buf.WriteString("null")
			return nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return fmt.Errorf("line %d: %q is not a boolean", n.Line, n.Value)
			}
			buf.WriteString(strconv.FormatBool(b))
			return nil
		case "!!int", "!!float":
			if jsonNumberRE.MatchString(n.Value) {
				buf.WriteString(n.Value)
				return nil
			}
			var f float64
			if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return fmt.Errorf("line %d: %s is not a number JSON can hold", n.Line, n.Value)
			}
			b, _ := json.Marshal(f)
			buf.Write(b)
			return nil
		}
		b, _ := json.Marshal(n.Value)
		buf.Write(b)
		return nil
	}
	return fmt.Errorf("line %d: unsupported YAML node", n.Line)
}
