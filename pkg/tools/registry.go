package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/toolpool/toolpool/internal/infra/subject"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// NamePattern is the pattern a tool name must match,
// ^[a-zA-Z0-9_-]{1,64}$, as the Anthropic Messages API requires. It is the rule of every token the pool builds into
// a NATS subject; envelope.ValidToolName checks it.
const NamePattern = subject.TokenPattern

// ErrDuplicateTool is returned (wrapped) by Register for a name that is
// already registered.
var ErrDuplicateTool = errors.New("a tool with this name is already registered")

// RegisterError is the error Register returns: which field of the tool is
// wrong and why, for callers that report it against their own source (a
// catalog file names the line of the field). Err, when set, is the cause
// (ErrDuplicateTool, the retry policy's classify.ErrInvalidPolicy, the schema
// engine's error), so errors.Is and errors.As see through it.
type RegisterError struct {
	// Tool is the name the tool was registered under.
	Tool string
	// Field is the tool's field in snake case: "name", "handler",
	// "timeout", "concurrency", "fairness", "per_key.concurrency",
	// "per_key.rate", "per_key.per", "per_key.burst", "cost", "cache",
	// "cache.ttl", "cache.scope", "approval.timeout",
	// "approval.when[i].field", "approval.when[i].pattern",
	// "input_schema" or "retry".
	Field string
	// Reason says what is wrong with the field, without naming it
	// ("must be >= 0, got -1s").
	Reason string
	// Err is the cause, or nil.
	Err error

	msg string // the message after the prefix, as Register words it
}

// Error returns `tools: register "<tool>": ` and the problem in words.
func (e *RegisterError) Error() string {
	msg := e.msg
	if msg == "" {
		msg = e.Field + ": " + e.Reason
	}
	return "tools: register " + strconv.Quote(e.Tool) + ": " + msg
}

// Unwrap returns the cause.
func (e *RegisterError) Unwrap() error { return e.Err }

// fieldError is a problem with field: label (how the message names the
// field) and reason, joined by a space ("timeout must be >= 0").
func fieldError(field, label, reason string) *RegisterError {
	return &RegisterError{Field: field, Reason: reason, msg: label + " " + reason}
}

// causeError is a problem with field found by another checker: label and
// the cause's message, joined by a colon ("retry policy: ...").
func causeError(field, label string, err error) *RegisterError {
	return &RegisterError{Field: field, Reason: err.Error(), Err: err, msg: label + ": " + err.Error()}
}

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
// it. The error, a *RegisterError, names the field that is wrong and why.
//
// Checks: the name matches NamePattern; the handler is set; the input schema
// is a JSON object with "type": "object" at the root that the engine
// compiles; Timeout and Concurrency are not negative; Fairness passes
// CheckFairness and PerKey KeyLimits.Check; Cost is between 0 and
// CostMax; Cache passes CachePolicy.Check and the tool is Cacheable;
// Approval passes ApprovalRule.Check; the retry policy, with
// classify's defaults applied, passes Policy.Validate; the name is not
// taken (ErrDuplicateTool). Defaults applied: Timeout TimeoutDefault,
// Concurrency ConcurrencyDefault, Retry Policy.WithDefaults, PerKey
// KeyLimits.WithDefaults.
func (r *Registry) Register(t Tool) error {
	reg, err := r.prepare(t)
	if err != nil {
		err.Tool = t.Name
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	if _, dup := old.byName[t.Name]; dup {
		return &RegisterError{Tool: t.Name, Field: "name", Reason: "is already registered", Err: ErrDuplicateTool, msg: ErrDuplicateTool.Error()}
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
func (r *Registry) prepare(t Tool) (*Registered, *RegisterError) {
	if !envelope.ValidToolName(t.Name) {
		return nil, fieldError("name", "name", "must match "+NamePattern)
	}
	if t.Handler == nil {
		return nil, fieldError("handler", "handler", "is nil")
	}
	if t.Timeout < 0 {
		return nil, fieldError("timeout", "timeout", fmt.Sprintf("must be >= 0, got %v", t.Timeout))
	}
	if t.Concurrency < 0 {
		return nil, fieldError("concurrency", "concurrency", fmt.Sprintf("must be >= 0, got %d", t.Concurrency))
	}
	if e := checkFairShares(&t); e != nil {
		return nil, e
	}
	if e := checkPolicy(&t); e != nil {
		return nil, e
	}
	ownPolicy(&t)
	schema, reason, err := checkSchema(t.InputSchema)
	if reason != "" {
		e := fieldError("input_schema", "input schema", reason)
		e.Err = err
		return nil, e
	}
	v, err := r.compiler.Compile(schema)
	if err != nil {
		return nil, causeError("input_schema", "input schema", err)
	}
	t.Retry = t.Retry.WithDefaults()
	if err := t.Retry.Validate(); err != nil {
		return nil, causeError("retry", "retry policy", err)
	}
	if t.Timeout == 0 {
		t.Timeout = TimeoutDefault
	}
	if t.Concurrency == 0 {
		t.Concurrency = ConcurrencyDefault
	}
	t.PerKey = t.PerKey.WithDefaults()
	t.InputSchema = schema
	return &Registered{Tool: t, validator: v}, nil
}

// checkSchema checks that schema is a JSON object with "type": "object" and
// returns a compact copy of it. Otherwise reason says what is wrong ("is
// empty") and err is the JSON parser's error, if any.
func checkSchema(schema json.RawMessage) (compact json.RawMessage, reason string, err error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil, "is empty", nil
	}
	var root map[string]json.RawMessage
	if err := json.Unmarshal(schema, &root); err != nil {
		if !json.Valid(schema) {
			return nil, "is not valid JSON: " + err.Error(), err
		}
		return nil, "must be a JSON object", nil
	}
	var typ any
	if raw, ok := root["type"]; ok {
		_ = json.Unmarshal(raw, &typ)
	}
	if typ != "object" {
		return nil, `must have "type": "object" at the root`, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, schema); err != nil {
		return nil, "is not valid JSON: " + err.Error(), err
	}
	return buf.Bytes(), "", nil
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
