package tools

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/pkg/classify"
)

// engineOnlyCompiler is the default engine without the fast check, so tests
// can show both paths give the same answers.
type engineOnlyCompiler struct{}

func (engineOnlyCompiler) Compile(schema json.RawMessage) (Validator, error) {
	v, err := DefaultCompiler().Compile(schema)
	if err != nil {
		return nil, err
	}
	jv := v.(*jsonschemaValidator)
	return &jsonschemaValidator{schema: jv.schema}, nil
}

// testEngines are the engines every fixture test runs on.
var testEngines = []struct {
	name     string
	compiler Compiler
}{
	{"jsonschema", DefaultCompiler()},
	{"jsonschema-engine-only", engineOnlyCompiler{}},
	{"gojsonschema", gojsonschemaCompiler{}},
}

func nopHandler(context.Context, json.RawMessage) (Output, error) { return Text("ok"), nil }

// mustTool registers a tool with schema on a fresh registry using c.
func mustTool(t testing.TB, c Compiler, name string, schema json.RawMessage) *Registered {
	t.Helper()
	r := NewRegistryWith(c)
	if err := r.Register(Tool{Name: name, InputSchema: schema, Handler: nopHandler}); err != nil {
		t.Fatalf("Register(%s): %v", name, err)
	}
	rt, ok := r.Lookup(name)
	if !ok {
		t.Fatalf("Lookup(%s) after Register: not found", name)
	}
	return rt
}

// fe is a classify.FieldError in short form for the tables.
type fe struct{ Path, Reason string }

// fieldsOf returns the fields of a validation error, failing the test if err
// is some other error.
func fieldsOf(t *testing.T, tool string, err error) []fe {
	t.Helper()
	if err == nil {
		return nil
	}
	var ve *classify.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %T %v, want *classify.ValidationError", err, err)
	}
	if ve.Tool != tool {
		t.Errorf("ValidationError.Tool = %q, want %q", ve.Tool, tool)
	}
	if len(ve.Fields) == 0 {
		t.Fatalf("ValidationError with no fields")
	}
	out := make([]fe, len(ve.Fields))
	for i, f := range ve.Fields {
		out[i] = fe(f)
	}
	return out
}

// The seed's exercise 2: valid arguments pass; invalid ones give a clear
// message that names the field.
func TestSeedSchemas(t *testing.T) {
	t.Parallel()
	schemas := map[string]json.RawMessage{
		"search_web": SearchWebSchema,
		"read_file":  ReadFileSchema,
		"write_file": WriteFileSchema,
	}
	cases := []struct {
		tool  string
		input string
		want  []fe // nil: valid
	}{
		// search_web
		{"search_web", `{"query":"go"}`, nil},
		{"search_web", `{"query":"nats jetstream","max_results":50,"language":"en"}`, nil},
		{"search_web", `{"query":"  x  ","max_results":1}`, nil},
		{"search_web", `{"query":"go","max_results":100}`, []fe{{"max_results", "must be <= 50"}}},
		{"search_web", `{"query":"go","max_results":0}`, []fe{{"max_results", "must be >= 1"}}},
		{"search_web", `{"query":"   "}`, []fe{{"query", "must not be empty or only whitespace"}}},
		{"search_web", `{"query":"\t\n"}`, []fe{{"query", "must not be empty or only whitespace"}}},
		{"search_web", `{"query":""}`, []fe{
			{"query", "must be at least 1 character long"},
			{"query", "must not be empty or only whitespace"},
		}},
		{"search_web", `{}`, []fe{{"query", "is required"}}},
		{"search_web", `{"max_results":10}`, []fe{{"query", "is required"}}},
		{"search_web", `{"query":5}`, []fe{{"query", "must be a string, got number"}}},
		{"search_web", `{"query":"go","max_results":"10"}`, []fe{{"max_results", "must be an integer, got string"}}},
		{"search_web", `{"query":"go","max_results":2.5}`, []fe{{"max_results", "must be an integer, got number"}}},
		{"search_web", `{"query":"go","max_results":true}`, []fe{{"max_results", "must be an integer, got boolean"}}},
		{"search_web", `{"query":"go","maxResults":5}`, []fe{{"maxResults", "is not a known property"}}},
		// every bad field at once, sorted by path
		{"search_web", `{"max_results":100,"language":7}`, []fe{
			{"language", "must be a string, got number"},
			{"max_results", "must be <= 50"},
			{"query", "is required"},
		}},
		// not an object, not JSON
		{"search_web", `["go"]`, []fe{{"", "must be an object, got array"}}},
		{"search_web", `null`, []fe{{"", "must be an object, got null"}}},
		{"search_web", `{"query":`, []fe{{"", "is not valid JSON: unexpected end of JSON input"}}},
		{"search_web", `{"query":'go'}`, []fe{{"", "is not valid JSON: invalid character '\\'' looking for beginning of value at byte 10"}}},
		{"search_web", `{"query":"a"} {"query":"b"}`, []fe{{"", "is not valid JSON: unexpected data after the top-level value at byte 13"}}},
		{"search_web", ``, []fe{{"", "is empty; expected a JSON object"}}},
		{"search_web", `{"query":"a"}` + "\n", nil},

		// read_file
		{"read_file", `{"path":"notes/a.txt"}`, nil},
		{"read_file", `{"path":"a.txt","encoding":"latin-1"}`, nil},
		{"read_file", `{}`, []fe{{"path", "is required"}}},
		{"read_file", `{"encoding":"utf-8"}`, []fe{{"path", "is required"}}},
		{"read_file", `{"path":" "}`, []fe{{"path", "must not be empty or only whitespace"}}},
		{"read_file", `{"path":null}`, []fe{{"path", "must be a string, got null"}}},
		{"read_file", `{"path":"a","encoding":8}`, []fe{{"encoding", "must be a string, got number"}}},

		// write_file
		{"write_file", `{"path":"a.txt","content":""}`, nil},
		{"write_file", `{"path":"a.txt","content":"x","mode":"append"}`, nil},
		{"write_file", `{"path":"a.txt","content":"x","mode":"write"}`, nil},
		{"write_file", `{"path":"a.txt","content":"x","mode":"overwrite"}`, []fe{{"mode", `must be one of "write", "append"`}}},
		{"write_file", `{"content":"x"}`, []fe{{"path", "is required"}}},
		{"write_file", `{"path":"a.txt"}`, []fe{{"content", "is required"}}},
		{"write_file", `{}`, []fe{{"content", "is required"}, {"path", "is required"}}},
		{"write_file", `{"path":["a"],"content":{"text":"x"}}`, []fe{
			{"content", "must be a string, got object"},
			{"path", "must be a string, got array"},
		}},
		// a value of the wrong type gets the type error only
		{"write_file", `{"path":"a","content":"x","mode":1}`, []fe{{"mode", "must be a string, got number"}}},
	}
	for _, eng := range testEngines {
		tools := map[string]*Registered{}
		for name, s := range schemas {
			tools[name] = mustTool(t, eng.compiler, name, s)
		}
		for _, tc := range cases {
			t.Run(eng.name+"/"+tc.tool+"/"+tc.input, func(t *testing.T) {
				t.Parallel()
				got := fieldsOf(t, tc.tool, tools[tc.tool].Validate(json.RawMessage(tc.input)))
				if !slices.Equal(got, tc.want) {
					t.Errorf("Validate(%s)\n got  %q\n want %q", tc.input, got, tc.want)
				}
			})
		}
	}
}

// The error text the worker hands to classify names the tool and each field.
func TestValidationErrorText(t *testing.T) {
	t.Parallel()
	rt := mustTool(t, DefaultCompiler(), "search_web", SearchWebSchema)
	err := rt.Validate(json.RawMessage(`{"query":"   ","max_results":100}`))
	if err == nil {
		t.Fatal("Validate: nil, want an error")
	}
	msg := err.Error()
	for _, part := range []string{"search_web", "max_results: must be <= 50", "query: must not be empty or only whitespace"} {
		if !strings.Contains(msg, part) {
			t.Errorf("error %q does not contain %q", msg, part)
		}
	}
	if d := classify.Classify(err); d.Class != "validation" || d.Retryable {
		t.Errorf("Classify(validation error) = class %q retryable %v, want validation, not retryable", d.Class, d.Retryable)
	}
}

// Reasons and paths of the default engine for the keywords a tool schema
// may carry, nested paths included.
func TestReasons(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		schema string
		input  string
		want   []fe
	}{
		{"nested path", `{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}}`,
			`{"items":[{"name":"a"},{"name":3},{}]}`,
			[]fe{{"items[1].name", "must be a string, got number"}, {"items[2].name", "is required"}}},
		{"odd keys quoted", `{"type":"object","properties":{"a b":{"type":"object","properties":{"x.y":{"type":"integer"}}}}}`,
			`{"a b":{"x.y":"s"}}`,
			[]fe{{`["a b"]["x.y"]`, "must be an integer, got string"}}},
		{"non-ASCII keys plain", `{"type":"object","properties":{"запрос":{"type":"string"}}}`,
			`{"запрос":1}`, []fe{{"запрос", "must be a string, got number"}}},
		{"nested required", `{"type":"object","properties":{"user":{"type":"object","required":["id","name"]}}}`,
			`{"user":{}}`, []fe{{"user.id", "is required"}, {"user.name", "is required"}}},
		{"maxLength", `{"type":"object","properties":{"s":{"type":"string","maxLength":3}}}`,
			`{"s":"abcd"}`, []fe{{"s", "must be at most 3 characters long"}}},
		{"minLength counts characters", `{"type":"object","properties":{"s":{"type":"string","minLength":3}}}`,
			`{"s":"яя"}`, []fe{{"s", "must be at least 3 characters long"}}},
		{"pattern", `{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z]+$"}}}`,
			`{"id":"A1"}`, []fe{{"id", `must match the pattern "^[a-z]+$"`}}},
		{"exclusive bounds", `{"type":"object","properties":{"n":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}}}`,
			`{"n":1}`, []fe{{"n", "must be < 1"}}},
		{"fractional bound", `{"type":"object","properties":{"n":{"type":"number","minimum":0.5}}}`,
			`{"n":0.25}`, []fe{{"n", "must be >= 0.5"}}},
		{"multipleOf", `{"type":"object","properties":{"n":{"type":"integer","multipleOf":5}}}`,
			`{"n":7}`, []fe{{"n", "must be a multiple of 5"}}},
		{"const", `{"type":"object","properties":{"v":{"const":"v1"}}}`,
			`{"v":"v2"}`, []fe{{"v", `must be "v1"`}}},
		{"enum of one", `{"type":"object","properties":{"v":{"enum":[1]}}}`,
			`{"v":2}`, []fe{{"v", `must be 1`}}},
		{"items count", `{"type":"object","properties":{"a":{"type":"array","minItems":2,"maxItems":3}}}`,
			`{"a":[1]}`, []fe{{"a", "must have at least 2 items"}}},
		{"uniqueItems", `{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`,
			`{"a":[1,2,1]}`, []fe{{"a", "must not contain duplicates; items [0] and [2] are equal"}}},
		{"properties count", `{"type":"object","minProperties":1}`,
			`{}`, []fe{{"", "must have at least 1 property"}}},
		{"format", `{"type":"object","properties":{"when":{"type":"string","format":"date-time"}}}`,
			`{"when":"yesterday"}`, []fe{{"when", "must be a valid date-time"}}},
		{"nullable merged", `{"type":"object","properties":{"s":{"anyOf":[{"type":"string"},{"type":"null"}]}}}`,
			`{"s":5}`, []fe{{"s", "must be a string or null, got number"}}},
		{"type list", `{"type":"object","properties":{"s":{"type":["string","integer","null"]}}}`,
			`{"s":{}}`, []fe{{"s", "must be null, an integer or a string, got object"}}},
		{"anyOf alternatives", `{"type":"object","properties":{"t":{"anyOf":[{"type":"string","minLength":2},{"type":"object","required":["id"]}]}}}`,
			`{"t":{}}`, []fe{{"t", `must match at least one of the allowed forms (must be a string, got object; or id: is required)`}}},
		{"oneOf two match", `{"type":"object","properties":{"n":{"oneOf":[{"type":"integer"},{"minimum":0}]}}}`,
			`{"n":3}`, []fe{{"n", "must match exactly one of the allowed forms, but matches more than one"}}},
		{"not", `{"type":"object","properties":{"n":{"not":{"const":0}}}}`,
			`{"n":0}`, []fe{{"n", `must not match the schema under "not"`}}},
		{"if then", `{"type":"object","properties":{"kind":{"type":"string"}},"if":{"properties":{"kind":{"const":"file"}}},"then":{"required":["path"]}}`,
			`{"kind":"file"}`, []fe{{"path", "is required"}}},
		{"dependentRequired", `{"type":"object","dependentRequired":{"user":["password"]}}`,
			`{"user":"u"}`, []fe{{"password", `is required when "user" is present`}}},
		{"additionalProperties schema", `{"type":"object","properties":{"a":{}},"additionalProperties":{"type":"integer"}}`,
			`{"a":"x","b":"y"}`, []fe{{"b", "must be an integer, got string"}}},
		{"propertyNames", `{"type":"object","propertyNames":{"pattern":"^[a-z]+$"}}`,
			`{"Bad":1}`, []fe{{"", `has a property name that is not allowed: "Bad"`}}},
		{"contains", `{"type":"object","properties":{"a":{"type":"array","contains":{"const":1}}}}`,
			`{"a":[2,3]}`, []fe{{"a", "must contain at least one matching item"}}},
		{"unevaluatedProperties", `{"type":"object","properties":{"a":{}},"unevaluatedProperties":false}`,
			`{"a":1,"b":2}`, []fe{{"b", "is not allowed"}}},
		{"big integers stay exact", `{"type":"object","properties":{"n":{"type":"integer","maximum":9007199254740992}}}`,
			`{"n":9007199254740993}`, []fe{{"n", "must be <= 9007199254740992"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rt := mustTool(t, DefaultCompiler(), "t", json.RawMessage(tc.schema))
			got := fieldsOf(t, "t", rt.Validate(json.RawMessage(tc.input)))
			if !slices.Equal(got, tc.want) {
				t.Errorf("Validate(%s)\n got  %q\n want %q", tc.input, got, tc.want)
			}
		})
	}
}

func TestFieldPath(t *testing.T) {
	t.Parallel()
	var doc any
	if err := json.Unmarshal([]byte(`{"items":[{"name":"a"}],"0":{"k":[[1]]}}`), &doc); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		tokens []string
		want   string
	}{
		{nil, ""},
		{[]string{"items"}, "items"},
		{[]string{"items", "0", "name"}, "items[0].name"},
		{[]string{"0", "k", "0", "0"}, "0.k[0][0]"},
		{[]string{"items", "5"}, "items.5"}, // past the end: a key, not an index
		{[]string{"missing", "x"}, "missing.x"},
		{[]string{"", "a\"b"}, `[""]["a\"b"]`},
	}
	for _, tc := range cases {
		if got := fieldPath(doc, tc.tokens); got != tc.want {
			t.Errorf("fieldPath(%q) = %q, want %q", tc.tokens, got, tc.want)
		}
	}
}

// The order of fields does not depend on the engine's map iteration.
func TestValidateStableOrder(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object","properties":{` +
		`"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"},"d":{"type":"string"},` +
		`"e":{"type":"string"},"f":{"type":"string"},"g":{"type":"string"},"h":{"type":"string"}},` +
		`"required":["z","y","x"]}`
	rt := mustTool(t, DefaultCompiler(), "t", json.RawMessage(schema))
	input := json.RawMessage(`{"h":1,"g":1,"f":1,"e":1,"d":1,"c":1,"b":1,"a":1}`)
	first := fieldsOf(t, "t", rt.Validate(input))
	if len(first) != 11 {
		t.Fatalf("got %d fields, want 11: %q", len(first), first)
	}
	if !slices.IsSortedFunc(first, func(a, b fe) int { return strings.Compare(a.Path, b.Path) }) {
		t.Errorf("fields not sorted by path: %q", first)
	}
	for range 50 {
		if got := fieldsOf(t, "t", rt.Validate(input)); !slices.Equal(got, first) {
			t.Fatalf("order changed:\n %q\n %q", got, first)
		}
	}
}
