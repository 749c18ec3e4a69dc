package tools

import (
	"encoding/json"
	"math/big"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fastSchemas are schemas the fast check compiles, with the keywords tool
// schemas use. The differential tests run every one of them.
var fastSchemas = []string{
	string(SearchWebSchema),
	string(ReadFileSchema),
	string(WriteFileSchema),
	echoSchema,
	`{"type":"object","properties":{
		"s":{"type":"string","minLength":2,"maxLength":3,"pattern":"^[a-zяé]"},
		"k":{"enum":["write","a\"b","é",2]},
		"c":{"const":"no"},
		"when":{"format":"date-time"}},
		"additionalProperties":{"type":["string","null"],"maxLength":1}}`,
	defsSchema, refSiblingSchema, prefixSchema, tupleSchema, constSchema, enumSchema,
	`{"type":"object","properties":{
		"n":{"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":7.5,"multipleOf":2},
		"x":{"type":"number","minimum":0.5,"maximum":10},
		"s":{"anyOf":[{"type":"string","maxLength":2},{"type":"null"}]},
		"o":{"oneOf":[{"type":"integer"},{"minimum":0}]},
		"t":{"not":{"const":"no"}},
		"k":{"enum":[1,"1",true,null]}}}`,
	`{"type":"object","properties":{"kind":{"enum":["a","b"]}},
		"if":{"properties":{"kind":{"const":"a"}}},"then":{"required":["s"]},"else":{"required":["n"]},
		"minProperties":1,"maxProperties":3}`,
	`{"type":"object","properties":{"l":{"type":"array","items":{"$ref":"#/$defs/node"},"minItems":1,"maxItems":3}},
		"$defs":{"node":{"type":"object","properties":{"n":{"type":"integer"},"s":{"type":"string"},
			"l":{"type":"array","items":{"$ref":"#/$defs/node"}}},"additionalProperties":false}}}`,
	`{"type":"object","additionalProperties":{"type":["string","integer"],"minLength":1,"maximum":5},
		"allOf":[{"required":["s"]},{"properties":{"s":{"pattern":"^a"}}}]}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
		"definitions":{"int":{"type":"integer"}},
		"properties":{"n":{"$ref":"#/definitions/int","maximum":1},"p":{"items":[{"type":"string"}],"additionalItems":false}}}`,
	`{"type":"object","properties":{"when":{"type":"string","format":"date-time"},"b":false,"big":{"maximum":1e300,"minimum":-1e300}}}`,
}

func compileBoth(t testing.TB, schema string) (*jsonschema.Schema, *fastSchema) {
	t.Helper()
	v, err := DefaultCompiler().Compile(json.RawMessage(schema))
	if err != nil {
		t.Fatalf("Compile(%s): %v", schema, err)
	}
	jv := v.(*jsonschemaValidator)
	if jv.fast == nil {
		t.Fatalf("no fast check for %s", schema)
	}
	return jv.schema, jv.fast
}

// agree checks that every decided fast verdict, on the decoded input and on
// its text, is the engine's, and returns both.
func agree(t testing.TB, schema string, sch *jsonschema.Schema, fast *fastSchema, input []byte) (decoded, text verdict) {
	t.Helper()
	text = fast.checkText(input)
	doc, reason := decodeInput(input)
	if reason != "" {
		if text != verdictUnknown {
			t.Fatalf("text check decided %d on input that does not decode (%s)\nschema %s\ninput  %q", text, reason, schema, input)
		}
		return verdictUnknown, text
	}
	decoded = fast.check(doc)
	if decoded == verdictUnknown && text == verdictUnknown {
		return decoded, text
	}
	engineValid := sch.Validate(doc) == nil
	for _, got := range []struct {
		on string
		v  verdict
	}{{"decoded input", decoded}, {"text", text}} {
		if got.v != verdictUnknown && (got.v == verdictValid) != engineValid {
			t.Fatalf("fast check on the %s says valid=%v, engine says valid=%v\nschema %s\ninput  %s",
				got.on, got.v == verdictValid, engineValid, schema, input)
		}
	}
	return decoded, text
}

// randomValue writes a random JSON value built from pieces that sit on the
// edges of the schemas' rules.
func randomValue(r *rand.Rand, depth int) string {
	atoms := []string{
		`null`, `true`, `false`, `""`, `" "`, `"\t"`, `"a"`, `"ab"`, `"abc"`, `"яя"`, `"no"`, `"write"`, `"append"`,
		`"1"`, `"2026-11-30T10:00:00Z"`, `"yesterday"`, `"Ann"`,
		`0`, `1`, `-1`, `2`, `3`, `4`, `5`, `6`, `7`, `8`, `10`, `-3`, `-2`, `50`, `51`, `2.0`, `2.5`, `0.5`, `0.25`,
		`1.0`, `1e2`, `1E0`, `-0`, `9007199254740993`, `9223372036854775808`, `-9223372036854775809`, `1e301`,
		// strings the text check must read as the decoder does: escapes, bad UTF-8
		`"\u0061"`, `"a\u0062"`, `"wr\u0069te"`, `"n\u006f"`, `"a\"b"`, `"é"`, `"\u00e9"`, `"\n"`, `"\\"`,
		`"\ud83d\ude00"`, `"\ud800"`, "\"\xff\"", "\"a\xffb\"", "\"\xe2\x82\"", `"2026-11-30T10:00:00\u005a"`,
		`-9223372036854775808`, `9223372036854775807`, `00`,
	}
	keys := []string{"query", "max_results", "language", "path", "encoding", "content", "mode",
		"first", "n", "p", "point", "v", "x", "s", "o", "t", "k", "kind", "l", "when", "b", "big", "extra", "text", "c"}
	// escapedKeys spell some keys with escapes, as a model may.
	escapedKeys := map[string]string{"path": `"p\u0061th"`, "text": `"t\u0065xt"`, "s": `"\u0073"`, "mode": `"m\u006fde"`}
	if depth > 2 {
		return atoms[r.IntN(len(atoms))]
	}
	sep, colon := ",", ":"
	if r.IntN(4) == 0 {
		sep, colon = " ,\n\t", " : "
	}
	switch r.IntN(6) {
	case 0, 1:
		return atoms[r.IntN(len(atoms))]
	case 2:
		n := r.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = randomValue(r, depth+1)
		}
		return "[" + strings.Join(parts, sep) + "]"
	default:
		n := r.IntN(4)
		parts := make([]string, 0, n+2)
		seen := map[string]bool{}
		if r.IntN(3) == 0 { // start from what the seed tools require
			switch r.IntN(3) {
			case 0:
				parts = append(parts, `"path":"a.txt"`, `"content":"x"`)
				seen["path"], seen["content"] = true, true
			case 1:
				parts = append(parts, `"query":"nats"`)
				seen["query"] = true
			default:
				parts = append(parts, `"text":"hi"`)
				seen["text"] = true
			}
		}
		for range n {
			k := keys[r.IntN(len(keys))]
			if seen[k] && r.IntN(6) != 0 { // now and then a key given twice
				continue
			}
			seen[k] = true
			key := strconv.Quote(k)
			if e, ok := escapedKeys[k]; ok && r.IntN(5) == 0 {
				key = e
			}
			parts = append(parts, key+colon+randomValue(r, depth+1))
		}
		return "{" + strings.Join(parts, sep) + "}"
	}
}

// The fast check never contradicts the engine, and it decides most inputs.
func TestFastCheckAgreesWithEngine(t *testing.T) {
	t.Parallel()
	for i, schema := range fastSchemas {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			sch, fast := compileBoth(t, schema)
			r := rand.New(rand.NewPCG(uint64(i), 7))
			var decoded, text [3]int // by verdict
			for range 4000 {
				d, tx := agree(t, schema, sch, fast, []byte(randomValue(r, 0)))
				decoded[d]++
				text[tx]++
			}
			for _, c := range []struct {
				on     string
				counts [3]int
			}{{"decoded input", decoded}, {"text", text}} {
				if c.counts[verdictValid] == 0 || c.counts[verdictInvalid] == 0 {
					t.Errorf("the fast check on the %s decided valid %d, invalid %d, unknown %d times: the corpus misses a side",
						c.on, c.counts[verdictValid], c.counts[verdictInvalid], c.counts[verdictUnknown])
				}
			}
		})
	}
}

// The seed tools' valid inputs never reach the engine.
func TestFastCheckDecidesSeedInputs(t *testing.T) {
	t.Parallel()
	for _, fx := range benchFixtures {
		_, fast := compileBoth(t, string(fx.schema))
		for _, tc := range []struct {
			input string
			want  verdict
		}{{fx.valid, verdictValid}, {fx.invalid, verdictInvalid}} {
			doc, _ := decodeInput([]byte(tc.input))
			if got := fast.check(doc); got != tc.want {
				t.Errorf("%s: fast check of %s = %v, want %v", fx.tool, tc.input, got, tc.want)
			}
			if got := fast.checkText([]byte(tc.input)); got != tc.want {
				t.Errorf("%s: fast check of the text %s = %v, want %v", fx.tool, tc.input, got, tc.want)
			}
		}
	}
}

func TestFastCheckDoesNotAllocate(t *testing.T) {
	// Under the race detector a pattern's pooled regexp matcher is
	// sometimes dropped and made again; .ci/run also runs this package
	// without it, where the count is exact.
	limit := 0.0
	if raceEnabled {
		limit = 1
	}
	_, fast := compileBoth(t, string(SearchWebSchema))
	doc, _ := decodeInput([]byte(benchFixtures[0].valid))
	if n := testing.AllocsPerRun(100, func() { fast.check(doc) }); n > limit {
		t.Errorf("fast check allocates %v times per run, want 0", n)
	}
	// A valid input is not even decoded.
	for _, fx := range benchFixtures {
		rt := mustTool(t, DefaultCompiler(), fx.tool, fx.schema)
		input := json.RawMessage(fx.valid)
		if n := testing.AllocsPerRun(100, func() { _ = rt.Validate(input) }); n > limit {
			t.Errorf("%s: Validate of a valid input allocates %v times per run, want 0", fx.tool, n)
		}
	}
}

// Validate answers the same, error for error, with the fast check and with
// the engine alone, also on input that is not valid JSON or not quite.
func TestValidateSameWithoutFastCheck(t *testing.T) {
	t.Parallel()
	for i, schema := range fastSchemas {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			fast := mustTool(t, DefaultCompiler(), "t", json.RawMessage(schema))
			engine := mustTool(t, engineOnlyCompiler{}, "t", json.RawMessage(schema))
			r := rand.New(rand.NewPCG(uint64(i), 8))
			for range 2000 {
				input := randomValue(r, 0)
				switch r.IntN(8) {
				case 0:
					input = input[:r.IntN(len(input)+1)] // cut short
				case 1:
					input += []string{" ", "\v", "\u00a0", "x", "{}", "\n\t"}[r.IntN(6)] // trailing bytes
				case 2:
					input = " \n" + input + "\r\n "
				}
				want := engine.Validate(json.RawMessage(input))
				got := fast.Validate(json.RawMessage(input))
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("Validate(%q)\nwith the fast check: %v\nengine alone:        %v\nschema %s", input, got, want, schema)
				}
			}
		})
	}
}

// Schemas with keywords outside the fast check's list get none, and still
// validate through the engine.
func TestFastCheckNotCompiled(t *testing.T) {
	t.Parallel()
	for _, schema := range []string{
		`{"type":"object","patternProperties":{"^x":{"type":"string"}}}`,
		`{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`,
		`{"type":"object","properties":{"a":{"type":"array","contains":{"const":1}}}}`,
		`{"type":"object","unevaluatedProperties":false}`,
		`{"type":"object","dependentRequired":{"a":["b"]}}`,
		`{"type":"object","propertyNames":{"maxLength":3}}`,
		`{"type":"object","properties":{"n":{"multipleOf":0.5}}}`,
		`{"type":"object","properties":{"n":{"minimum":1e300}}}`,
		`{"type":"object","properties":{"v":{"const":{"a":1}}}}`,
		`{"type":"object","properties":{"v":{"enum":[[1],2]}}}`,
		`{"type":"object","$ref":"#/$defs/loop","$defs":{"loop":{"$ref":"#/$defs/loop"}}}`,
		`{"$id":"https://example.com/tree","$dynamicAnchor":"node","type":"object","properties":{"c":{"$dynamicRef":"#node"}}}`,
	} {
		v, err := DefaultCompiler().Compile(json.RawMessage(schema))
		if err != nil {
			t.Errorf("Compile(%s): %v", schema, err)
			continue
		}
		if v.(*jsonschemaValidator).fast != nil {
			t.Errorf("Compile(%s): got a fast check, want none", schema)
		}
	}
}

// Every field the fast check lists exists in the engine's Schema, so a
// rename in a new engine version shows here.
func TestFastFieldsExist(t *testing.T) {
	t.Parallel()
	rt := reflect.TypeFor[jsonschema.Schema]()
	for name := range fastFields {
		if _, ok := rt.FieldByName(name); !ok {
			t.Errorf("fastFields lists %q, which jsonschema.Schema does not have", name)
		}
	}
}

func TestIntBounds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		r               string
		exclusive       bool
		ceil, floor     int64
		ceilOK, floorOK bool
	}{
		{"5", false, 5, 5, true, true},
		{"5", true, 6, 4, true, true},
		{"5/2", false, 3, 2, true, true},
		{"5/2", true, 3, 2, true, true},
		{"-5/2", false, -2, -3, true, true},
		{"-5/2", true, -2, -3, true, true},
		{"0", true, 1, -1, true, true},
		{"9223372036854775807", true, 0, 9223372036854775806, false, true},
	}
	for _, tc := range cases {
		var r big.Rat
		r.SetString(tc.r)
		c, cok := ceilInt64(&r, tc.exclusive)
		f, fok := floorInt64(&r, tc.exclusive)
		if cok != tc.ceilOK || (cok && c != tc.ceil) {
			t.Errorf("ceilInt64(%s, %v) = %d, %v; want %d, %v", tc.r, tc.exclusive, c, cok, tc.ceil, tc.ceilOK)
		}
		if fok != tc.floorOK || (fok && f != tc.floor) {
			t.Errorf("floorInt64(%s, %v) = %d, %v; want %d, %v", tc.r, tc.exclusive, f, fok, tc.floor, tc.floorOK)
		}
	}
}

// FuzzFastCheck holds the fast check, on the decoded input and on its text,
// to the engine on arbitrary input, and Validate to Validate without the
// fast check.
func FuzzFastCheck(f *testing.F) {
	for _, fx := range benchFixtures {
		f.Add(0, fx.valid)
		f.Add(0, fx.invalid)
	}
	for _, tc := range draft2020Cases {
		f.Add(1, tc.input)
	}
	f.Add(3, `{"text":"a","text":1}`)
	f.Add(3, `{"t\u0065xt":"a"}`)
	f.Add(4, `{"s":"\u0061b","k":"a\"b","when":"2026-11-30T10:00:00Z"}`)
	f.Add(4, "{\"s\":\"a\xffb\"} ")
	type compiled struct {
		sch          *jsonschema.Schema
		fast         *fastSchema
		tool, engine *Registered
	}
	all := make([]compiled, len(fastSchemas))
	for i, s := range fastSchemas {
		all[i].sch, all[i].fast = compileBoth(f, s)
		all[i].tool = mustTool(f, DefaultCompiler(), "t", json.RawMessage(s))
		all[i].engine = mustTool(f, engineOnlyCompiler{}, "t", json.RawMessage(s))
	}
	f.Fuzz(func(t *testing.T, which int, input string) {
		which = (which%len(all) + len(all)) % len(all)
		c := all[which]
		agree(t, fastSchemas[which], c.sch, c.fast, []byte(input))
		got, want := c.tool.Validate(json.RawMessage(input)), c.engine.Validate(json.RawMessage(input))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Validate(%q)\nwith the fast check: %v\nengine alone:        %v", input, got, want)
		}
	})
}
