package tools

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// draft2020Cases are draft 2020-12 keywords a model's tool schema may carry
// (MCP servers publish 2020-12 schemas), each with inputs and the answer the
// specification gives. gojsonschemaWrong marks the inputs where
// gojsonschema's answer differs from the specification; the test holds both
// engines to exactly this table, so it documents what each handles.
var draft2020Cases = []struct {
	keyword           string
	schema            string
	input             string
	valid             bool
	gojsonschemaWrong bool
}{
	// $defs + $ref
	{"$defs+$ref", defsSchema, `{"first":"Ann"}`, true, false},
	{"$defs+$ref", defsSchema, `{"first":""}`, false, false},
	{"$defs+$ref", defsSchema, `{"first":5}`, false, false},
	// $ref next to other keywords: in 2020-12 both apply; draft-07 ignores the siblings
	{"$ref+siblings", refSiblingSchema, `{"n":5}`, true, false},
	{"$ref+siblings", refSiblingSchema, `{"n":20}`, false, true},
	// prefixItems
	{"prefixItems", prefixSchema, `{"p":[1,"a"]}`, true, false},
	{"prefixItems", prefixSchema, `{"p":[1,2]}`, false, true},
	{"prefixItems", prefixSchema, `{"p":["a","b"]}`, false, true},
	// prefixItems with "items": false (a fixed-length tuple)
	{"prefixItems+items:false", tupleSchema, `{"point":[1,2]}`, true, true},
	{"prefixItems+items:false", tupleSchema, `{"point":[1,2,3]}`, false, false},
	{"prefixItems+items:false", tupleSchema, `{"point":[1,"x"]}`, false, false},
	// const
	{"const", constSchema, `{"v":2}`, true, false},
	{"const", constSchema, `{"v":2.0}`, true, false},
	{"const", constSchema, `{"v":3}`, false, false},
	{"const", constSchema, `{"v":"2"}`, false, false},
	{"const object", constObjectSchema, `{"v":{"a":1}}`, true, false},
	{"const object", constObjectSchema, `{"v":{"a":2}}`, false, false},
	// enum
	{"enum", enumSchema, `{"v":"a"}`, true, false},
	{"enum", enumSchema, `{"v":null}`, true, false},
	{"enum", enumSchema, `{"v":"c"}`, false, false},
	{"enum", enumSchema, `{"v":1}`, false, false},
	// 2019-09 keywords that 2020-12 keeps
	{"dependentRequired", `{"type":"object","dependentRequired":{"user":["password"]}}`, `{"user":"u"}`, false, true},
	{"unevaluatedProperties", `{"type":"object","allOf":[{"properties":{"a":{}}}],"unevaluatedProperties":false}`, `{"a":1,"b":2}`, false, true},
}

const (
	defsSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
		"$defs":{"name":{"type":"string","minLength":1}},
		"properties":{"first":{"$ref":"#/$defs/name"}}}`
	refSiblingSchema = `{"type":"object","$defs":{"int":{"type":"integer"}},
		"properties":{"n":{"$ref":"#/$defs/int","maximum":10}}}`
	prefixSchema = `{"type":"object","properties":{"p":{"type":"array",
		"prefixItems":[{"type":"number"},{"type":"string"}]}}}`
	tupleSchema = `{"type":"object","properties":{"point":{"type":"array",
		"prefixItems":[{"type":"number"},{"type":"number"}],"items":false}}}`
	constSchema       = `{"type":"object","properties":{"v":{"const":2}}}`
	constObjectSchema = `{"type":"object","properties":{"v":{"const":{"a":1}}}}`
	enumSchema        = `{"type":"object","properties":{"v":{"enum":["a","b",null]}}}`
)

func TestDraft2020Keywords(t *testing.T) {
	t.Parallel()
	for _, eng := range testEngines {
		wrong := map[string]int{}
		for _, tc := range draft2020Cases {
			v, err := eng.compiler.Compile(json.RawMessage(tc.schema))
			if err != nil {
				t.Errorf("%s: Compile(%s schema): %v", eng.name, tc.keyword, err)
				continue
			}
			fields := v.Validate(json.RawMessage(tc.input))
			gotValid := len(fields) == 0
			correct := gotValid == tc.valid
			wantCorrect := eng.name != "gojsonschema" || !tc.gojsonschemaWrong
			if correct != wantCorrect {
				t.Errorf("%s: %s %s: valid=%v (fields %q), the specification says valid=%v",
					eng.name, tc.keyword, tc.input, gotValid, fields, tc.valid)
			}
			if !correct {
				wrong[tc.keyword]++
			}
		}
		t.Logf("%-24s wrong answers by keyword: %v", eng.name, wrong)
	}
}

// The default engine reads "$schema" and applies the older draft's rules to
// a schema that names one; without "$schema" a schema is 2020-12.
func TestDraftFromSchemaKeyword(t *testing.T) {
	t.Parallel()
	items := `"type":"object","properties":{"p":{"type":"array","items":[{"type":"string"}]}}`
	cases := []struct {
		name   string
		schema string
		input  string
		valid  bool
	}{
		// draft-07: items as an array is a tuple
		{"draft-07 tuple", `{"$schema":"http://json-schema.org/draft-07/schema#",` + items + `}`, `{"p":["a",1]}`, true},
		{"draft-07 tuple bad", `{"$schema":"http://json-schema.org/draft-07/schema#",` + items + `}`, `{"p":[1]}`, false},
		// draft-07: $ref siblings are ignored
		{"draft-07 $ref siblings", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"definitions":{"int":{"type":"integer"}},"properties":{"n":{"$ref":"#/definitions/int","maximum":10}}}`, `{"n":20}`, true},
	}
	for _, tc := range cases {
		v, err := DefaultCompiler().Compile(json.RawMessage(tc.schema))
		if err != nil {
			t.Errorf("%s: Compile: %v", tc.name, err)
			continue
		}
		if got := len(v.Validate(json.RawMessage(tc.input))) == 0; got != tc.valid {
			t.Errorf("%s: valid=%v, want %v", tc.name, got, tc.valid)
		}
	}
	// items as an array is not a 2020-12 schema: the metaschema refuses it.
	if _, err := DefaultCompiler().Compile(json.RawMessage(`{` + items + `}`)); err == nil {
		t.Error("Compile(2020-12 schema with array items): nil error, want the metaschema's refusal")
	}
}

// The default engine never loads anything a schema refers to.
func TestCompileRefusesExternalReferences(t *testing.T) {
	t.Parallel()
	for _, ref := range []string{
		"https://example.com/schemas/user.json",
		"file:///etc/hostname",
		"other.json#/$defs/x",
	} {
		schema := fmt.Sprintf(`{"type":"object","properties":{"u":{"$ref":%q}}}`, ref)
		_, err := DefaultCompiler().Compile(json.RawMessage(schema))
		if err == nil {
			t.Errorf("Compile with $ref %s: nil error, want a refusal", ref)
			continue
		}
		if !strings.Contains(err.Error(), "must not refer to other documents") {
			t.Errorf("Compile with $ref %s: %v, want the refusal", ref, err)
		}
	}
}

// Schemas the engine's metaschema or regexp engine refuse fail at
// registration, not at the first call.
func TestCompileRejectsBadSchemas(t *testing.T) {
	t.Parallel()
	for _, schema := range []string{
		`{"type":"object","properties":{"a":{"type":"strnig"}}}`,
		`{"type":"object","properties":{"a":{"type":"string","minLength":-1}}}`,
		`{"type":"object","properties":{"a":{"type":"string","pattern":"(?<=a)b"}}}`, // lookbehind: not RE2
		`{"type":"object","required":"a"}`,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`,
	} {
		if _, err := DefaultCompiler().Compile(json.RawMessage(schema)); err == nil {
			t.Errorf("Compile(%s): nil error", schema)
		}
	}
}
