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
	Hints       *hintsSpec   `yaml:"hints"`
	Concurrency *int         `yaml:"concurrency"`
	PauseAbove  *string      `yaml:"pause_on_rate_limit_above"`
	Fairness    *string      `yaml:"fairness"`
	PerKey      *perKeySpec  `yaml:"per_key"`
	Cost        *int         `yaml:"cost"`
	Cache       *cacheSpec   `yaml:"cache"`
	Approval    yaml.Node    `yaml:"approval"` // always, or {when, timeout}: checkApproval
	Backend     string       `yaml:"backend"`
	Webhook     *webhookSpec `yaml:"webhook"`
	Exec        *execSpec    `yaml:"exec"`
	MCP         *mcpSpec     `yaml:"mcp"`
}

type hintsSpec struct {
	ReadOnly    *bool `yaml:"read_only"`
	Destructive *bool `yaml:"destructive"`
	OpenWorld   *bool `yaml:"open_world"`
	// Idempotent is refused with a pointer to the entry's idempotent key.
	Idempotent *bool `yaml:"idempotent"`
}

type perKeySpec struct {
	Concurrency *int    `yaml:"concurrency"`
	Rate        *int    `yaml:"rate"`
	Per         *string `yaml:"per"`
	Burst       *int    `yaml:"burst"`
}

type cacheSpec struct {
	TTL   *string `yaml:"ttl"`
	Scope *string `yaml:"scope"`
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

	if err := checkShape(p.root); err != nil {
		tool := ""
		if err.tool >= 0 {
			tool = p.toolLabel(err.tool)
		}
		return nil, p.failf(err.line, tool, err.path, "%s", err.msg)
	}
	var spec fileSpec
	if err := doc.Decode(&spec); err != nil {
		// checkShape let through what the decoder refuses: a bug here.
		return nil, p.failf(0, "", "", "cannot be read: %v", err)
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

// yamlLineRE reads the line of a YAML syntax error. The parser gives a
// syntax error only as text (there is no node yet to take a line from);
// every other problem is found on the yaml.Node tree (checkShape, entry).
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
