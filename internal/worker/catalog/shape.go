package catalog

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The shape of a catalog file, checked on the parsed yaml.Node tree before
// it is decoded: every problem is found at a node, so its line is the node's
// Line and its path the keys walked to it, without reading the YAML
// library's messages. The shapes mirror fileSpec and its parts; the test
// TestShapesMatchSpec holds the two together.

// shapeKind is what a value must be.
type shapeKind int

const (
	shapeAny       shapeKind = iota // anything (input_schema: a free-form JSON Schema)
	shapeScalar                     // one value the decode target accepts
	shapeList                       // a sequence of elem
	shapeMapping                    // a mapping with the keys in fields
	shapeStringMap                  // a mapping of names to elem
)

// shape is what the catalog expects at one place of the file.
type shape struct {
	kind   shapeKind
	words  string       // what the value must be, for errors ("an integer")
	target func() any   // shapeScalar: a new pointer to decode the value into
	fields []fieldShape // shapeMapping: the keys, in the order the hint lists them
	elem   *shape       // shapeList, shapeStringMap: the items
}

// fieldShape is one key of a mapping.
type fieldShape struct {
	key   string
	shape *shape
}

func scalarShape[T any](words string) *shape {
	return &shape{kind: shapeScalar, words: words, target: func() any { return new(T) }}
}

func mappingShape(fields ...fieldShape) *shape {
	return &shape{kind: shapeMapping, words: "a mapping", fields: fields}
}

var (
	intShape     = scalarShape[int]("an integer")
	floatShape   = scalarShape[float64]("a number")
	boolShape    = scalarShape[bool]("true or false")
	stringShape  = scalarShape[string]("a string")
	stringsShape = &shape{kind: shapeList, words: "a list of strings", elem: stringShape}

	hintsShape = mappingShape(
		fieldShape{"read_only", boolShape},
		fieldShape{"destructive", boolShape},
		fieldShape{"open_world", boolShape},
		fieldShape{"idempotent", boolShape},
	)
	retryShape = mappingShape(
		fieldShape{"max_attempts", intShape},
		fieldShape{"base_delay", stringShape},
		fieldShape{"max_delay", stringShape},
		fieldShape{"jitter", floatShape},
	)
	perKeyShape = mappingShape(
		fieldShape{"concurrency", intShape},
		fieldShape{"rate", intShape},
		fieldShape{"per", stringShape},
		fieldShape{"burst", intShape},
	)
	cacheShape = mappingShape(
		fieldShape{"ttl", stringShape},
		fieldShape{"scope", stringShape},
	)
	webhookShape = mappingShape(
		fieldShape{"url", stringShape},
		fieldShape{"headers", &shape{kind: shapeStringMap, words: "a mapping of names to strings", elem: stringShape}},
		fieldShape{"max_output_bytes", intShape},
	)
	execShape = mappingShape(
		fieldShape{"command", stringsShape},
		fieldShape{"env", stringsShape},
		fieldShape{"dir", stringShape},
		fieldShape{"term_grace", stringShape},
		fieldShape{"max_output_bytes", intShape},
	)
	stringMapShape = &shape{kind: shapeStringMap, words: "a mapping of names to strings", elem: stringShape}
	mcpShape       = mappingShape(
		fieldShape{"command", stringsShape},
		fieldShape{"env", stringMapShape},
		fieldShape{"dir", stringShape},
		fieldShape{"url", stringShape},
		fieldShape{"headers", stringMapShape},
		fieldShape{"tools", stringsShape},
		fieldShape{"prefix", stringShape},
		fieldShape{"sessions", intShape},
	)
	toolShape = mappingShape(
		fieldShape{"name", stringShape},
		fieldShape{"description", stringShape},
		fieldShape{"input_schema", &shape{kind: shapeAny}},
		fieldShape{"timeout", stringShape},
		fieldShape{"retry", retryShape},
		fieldShape{"idempotent", boolShape},
		fieldShape{"hints", hintsShape},
		fieldShape{"concurrency", intShape},
		fieldShape{"pause_on_rate_limit_above", stringShape},
		fieldShape{"fairness", stringShape},
		fieldShape{"per_key", perKeyShape},
		fieldShape{"cost", intShape},
		fieldShape{"cache", cacheShape},
		fieldShape{"approval", &shape{kind: shapeAny}}, // always, or a mapping: checkApproval
		fieldShape{"backend", stringShape},
		fieldShape{"webhook", webhookShape},
		fieldShape{"exec", execShape},
		fieldShape{"mcp", mcpShape},
	)
	// toolsShape is the list under "tools"; each item is one tool, and the
	// paths of errors in it start from the item.
	toolsShape = &shape{kind: shapeList, words: "a list of tools", elem: toolShape}
	fileShape  = mappingShape(
		fieldShape{"version", intShape},
		fieldShape{"tools", toolsShape},
	)
)

// lookup returns the shape of key in mapping shape s, or nil.
func (s *shape) lookup(key string) *shape {
	for _, f := range s.fields {
		if f.key == key {
			return f.shape
		}
	}
	return nil
}

// knownKeys lists the keys of mapping shape s, for the hint of an unknown
// key.
func (s *shape) knownKeys() string {
	keys := make([]string, len(s.fields))
	for i, f := range s.fields {
		keys[i] = f.key
	}
	return strings.Join(keys, ", ")
}

// shapeError is the first problem checkShape finds.
type shapeError struct {
	line int
	tool int    // index of the tool the problem is in, -1 outside the tools
	path string // the field, dotted from the tool (or the file)
	msg  string
}

// checkShape checks root, the document's top mapping, against the file's
// shape, in document order, and returns the first problem, or nil.
func checkShape(root *yaml.Node) *shapeError {
	w := shapeWalker{tool: -1}
	return w.walk(root, fileShape, "")
}

type shapeWalker struct {
	tool  int // the tool being walked, -1 outside the tools
	depth int // aliases followed, against a cycle
}

func (w *shapeWalker) fail(n *yaml.Node, path, msg string) *shapeError {
	return &shapeError{line: n.Line, tool: w.tool, path: path, msg: msg}
}

func (w *shapeWalker) walk(n *yaml.Node, s *shape, path string) *shapeError {
	if n.Kind == yaml.AliasNode {
		if w.depth > 100 || n.Alias == nil {
			return w.fail(n, path, "has aliases nested too deeply")
		}
		w.depth++
		defer func() { w.depth-- }()
		return w.walk(n.Alias, s, path)
	}
	if s.kind == shapeAny || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil // left out: the zero value
	}
	switch s.kind {
	case shapeScalar:
		if n.Kind != yaml.ScalarNode || n.Decode(s.target()) != nil {
			return w.wrongType(n, s, path)
		}
	case shapeList:
		if n.Kind != yaml.SequenceNode {
			return w.wrongType(n, s, path)
		}
		for i, item := range n.Content {
			if s == toolsShape {
				w.tool = i
				if err := w.walk(item, s.elem, ""); err != nil {
					return err
				}
				w.tool = -1
				continue
			}
			if err := w.walk(item, s.elem, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case shapeMapping, shapeStringMap:
		if n.Kind != yaml.MappingNode {
			return w.wrongType(n, s, path)
		}
		return w.mapping(n, s, path)
	}
	return nil
}

// mapping checks the keys of n, a mapping, and their values.
func (w *shapeWalker) mapping(n *yaml.Node, s *shape, path string) *shapeError {
	for i := 0; i+1 < len(n.Content); i += 2 {
		ki := n.Content[i]
		for j := i + 2; j+1 < len(n.Content); j += 2 {
			if kj := n.Content[j]; kj.Kind == ki.Kind && kj.Value == ki.Value {
				return w.fail(kj, "", "key "+strconv.Quote(kj.Value)+" appears twice (first at line "+strconv.Itoa(ki.Line)+")")
			}
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			// <<: *other (or a list of them): the merged mappings' keys
			// count as this mapping's.
			if err := w.merge(v, s, path); err != nil {
				return err
			}
			continue
		}
		key := joinPath(path, k.Value)
		if s.kind == shapeStringMap {
			if err := w.walk(v, s.elem, key); err != nil {
				return err
			}
			continue
		}
		sub := s.lookup(k.Value)
		if sub == nil {
			return w.fail(k, key, "unknown key (known keys: "+s.knownKeys()+")")
		}
		if err := w.walk(v, sub, key); err != nil {
			return err
		}
	}
	return nil
}

// merge checks the mappings a merge key brings in.
func (w *shapeWalker) merge(v *yaml.Node, s *shape, path string) *shapeError {
	for v.Kind == yaml.AliasNode && v.Alias != nil && w.depth <= 100 {
		v = v.Alias
	}
	switch v.Kind {
	case yaml.MappingNode:
		return w.mapping(v, s, path)
	case yaml.SequenceNode:
		for _, m := range v.Content {
			if err := w.merge(m, s, path); err != nil {
				return err
			}
		}
		return nil
	}
	return w.fail(v, path, "must merge a mapping (<<: *name), not "+valueWords(v))
}

func (w *shapeWalker) wrongType(n *yaml.Node, s *shape, path string) *shapeError {
	return w.fail(n, path, "must be "+s.words+", not "+valueWords(n))
}

// valueWords describes a YAML value the catalog refused.
func valueWords(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	if n.ShortTag() == "!!null" {
		return "empty"
	}
	value := n.Value
	if len(value) > 40 {
		value = value[:40] + "…"
	}
	return strconv.Quote(value)
}
