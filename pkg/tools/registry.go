package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/toolpool/toolpool/internal/subject"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// NamePattern is the pattern a tool name must match, as the Anthropic
// Messages API requires. It is the rule of every token the pool builds into
// a NATS subject; envelope.ValidToolName checks it.
const NamePattern = subject.TokenPattern

// ErrDuplicateTool is returned (wrapped) by Register for a name that is
// already registered.
var ErrDuplicateTool = errors.New("a tool with this name is already registered")

// Registered is a tool as the registry holds it: defaults applied, schema
// compiled.
type Registered struct {
	Tool
	validator Validator
}

// Validate checks input against the tool's compiled schema. It returns nil or
// a *classify.ValidationError listing every bad field in a stable order.
//
// Fields are sorted by path, then by reason. Paths are written the way the
// model reads them: object keys joined by dots and array indices in brackets
// (items[0].name); a key that is not a plain word is quoted (["a b"]); the
// input as a whole is "". A missing required property is reported at its own
// path ("query: is required"). Input that is not one JSON value is reported
// at "" with the parse error.
//
// A Registered built by hand rather than by a Registry has no compiled
// schema and accepts every input.
func (r *Registered) Validate(input json.RawMessage) error {
	if r.validator == nil {
		return nil
	}
	fields := r.validator.Validate(input)
	if len(fields) == 0 {
		return nil
	}
	return &classify.ValidationError{Tool: r.Name, Fields: sortFields(fields)}
}

// Definition returns the tool in Anthropic tools format.
func (r *Registered) Definition() Definition {
	return Definition{Name: r.Name, Description: r.Description, InputSchema: slices.Clone(r.InputSchema)}
}

// Registry holds the tools a worker serves. It is safe for concurrent use:
// lookups read an immutable snapshot without locking; Register copies it.
type Registry struct {
	compiler Compiler
	mu       sync.Mutex // serializes writers
	snap     atomic.Pointer[snapshot]
}

// snapshot is the registry's content at one moment; never modified once
// published.
type snapshot struct {
	byName map[string]*Registered
	names  []string // sorted
}

// NewRegistry returns an empty registry using the default schema engine
// (see DefaultCompiler).
func NewRegistry() *Registry { return NewRegistryWith(DefaultCompiler()) }

// NewRegistryWith returns an empty registry that compiles schemas with c.
func NewRegistryWith(c Compiler) *Registry {
	r := &Registry{compiler: c}
	r.snap.Store(&snapshot{byName: map[string]*Registered{}})
	return r
}

// Register checks t (name, schema compiles, root type object, policy) and adds
// it. The error names what is wrong.
//
// Checks: the name matches NamePattern; the handler is set; the input schema
// is a JSON object with "type": "object" at the root that the engine
// compiles; Timeout and Concurrency are not negative; the retry policy,
// with classify's defaults applied, passes Policy.Validate; the name is not
// taken (ErrDuplicateTool). Defaults applied: Timeout TimeoutDefault,
// Concurrency ConcurrencyDefault, Retry Policy.WithDefaults.
func (r *Registry) Register(t Tool) error {
	reg, err := r.prepare(t)
	if err != nil {
		return fmt.Errorf("tools: register %q: %w", t.Name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	if _, dup := old.byName[t.Name]; dup {
		return fmt.Errorf("tools: register %q: %w", t.Name, ErrDuplicateTool)
	}
	next := &snapshot{byName: make(map[string]*Registered, len(old.byName)+1)}
	for name, rt := range old.byName {
		next.byName[name] = rt
	}
	next.byName[t.Name] = reg
	next.names = append(slices.Clone(old.names), t.Name)
	slices.Sort(next.names)
	r.snap.Store(next)
	return nil
}

// prepare checks t, applies defaults and compiles the schema.
func (r *Registry) prepare(t Tool) (*Registered, error) {
	if !envelope.ValidToolName(t.Name) {
		return nil, errors.New("name must match " + NamePattern)
	}
	if t.Handler == nil {
		return nil, errors.New("handler is nil")
	}
	if t.Timeout < 0 {
		return nil, fmt.Errorf("timeout must be >= 0, got %v", t.Timeout)
	}
	if t.Concurrency < 0 {
		return nil, fmt.Errorf("concurrency must be >= 0, got %d", t.Concurrency)
	}
	schema, err := checkSchema(t.InputSchema)
	if err != nil {
		return nil, err
	}
	v, err := r.compiler.Compile(schema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	t.Retry = t.Retry.WithDefaults()
	if err := t.Retry.Validate(); err != nil {
		return nil, fmt.Errorf("retry policy: %w", err)
	}
	if t.Timeout == 0 {
		t.Timeout = TimeoutDefault
	}
	if t.Concurrency == 0 {
		t.Concurrency = ConcurrencyDefault
	}
	t.InputSchema = schema
	return &Registered{Tool: t, validator: v}, nil
}

// checkSchema checks that schema is a JSON object with "type": "object" and
// returns a compact copy of it.
func checkSchema(schema json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil, errors.New("input schema is empty")
	}
	var root map[string]json.RawMessage
	if err := json.Unmarshal(schema, &root); err != nil {
		if !json.Valid(schema) {
			return nil, fmt.Errorf("input schema is not valid JSON: %w", err)
		}
		return nil, errors.New("input schema must be a JSON object")
	}
	var typ any
	if raw, ok := root["type"]; ok {
		_ = json.Unmarshal(raw, &typ)
	}
	if typ != "object" {
		return nil, errors.New(`input schema must have "type": "object" at the root`)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, schema); err != nil {
		return nil, fmt.Errorf("input schema is not valid JSON: %w", err)
	}
	return buf.Bytes(), nil
}

// MustRegister is Register that panics on error.
func (r *Registry) MustRegister(t Tool) {
	if err := r.Register(t); err != nil {
		panic(err)
	}
}

// Lookup returns a registered tool.
func (r *Registry) Lookup(name string) (*Registered, bool) {
	rt, ok := r.snap.Load().byName[name]
	return rt, ok
}

// Names returns the tool names, sorted.
func (r *Registry) Names() []string { return slices.Clone(r.snap.Load().names) }

// Definitions returns every tool in Anthropic tools format, sorted by name.
func (r *Registry) Definitions() []Definition {
	s := r.snap.Load()
	defs := make([]Definition, len(s.names))
	for i, name := range s.names {
		defs[i] = s.byName[name].Definition()
	}
	return defs
}

// Validator validates one instance against a compiled schema. It must be
// safe for concurrent use.
type Validator interface {
	// Validate returns the failing fields, nil when valid. Input that is not
	// valid JSON is one field with path "". The order is free: the registry
	// sorts.
	Validate(input json.RawMessage) []classify.FieldError
}

// Compiler compiles a JSON Schema; the engine sits behind it.
type Compiler interface {
	// Compile compiles schema, a JSON object, once; the Validator it returns
	// runs per call.
	Compile(schema json.RawMessage) (Validator, error)
}
