package tools

import (
	"encoding/json"
	"strings"
	"testing"
)

// Benchmarks of the schema engines on the built-in tools' schemas and on
// echo's, all in one run so the numbers compare (docs/decisions.md):
//
//	go test -run '^$' -bench 'Validate|Compile|Decode' -benchmem ./pkg/tools/
//
// jsonschema is the chosen configuration (santhosh-tekuri/jsonschema/v6 with
// the fast check); jsonschema-engine-only is the same engine without it;
// gojsonschema is xeipuuv/gojsonschema. Every engine that decodes gets its
// input decoded the same way (encoding/json, UseNumber); the fast check
// reads a valid input's text without decoding it.

var benchFixtures = []struct {
	tool, valid, invalid string
	schema               json.RawMessage
}{
	{"search_web", `{"query":"nats jetstream retry backoff","max_results":10,"language":"en"}`,
		`{"query":"   ","max_results":100}`, SearchWebSchema},
	{"read_file", `{"path":"notes/2026/plan.md","encoding":"utf-8"}`,
		`{"path":5}`, ReadFileSchema},
	{"write_file", `{"path":"out/report.md","content":"# Report\n\nAll calls succeeded.","mode":"append"}`,
		`{"path":"out/report.md","mode":"overwrite"}`, WriteFileSchema},
	// the bench tool with the bench's 256-byte input (orchestrator bench)
	{"echo", `{"text":"` + strings.Repeat("x", 256-len(`{"text":""}`)) + `"}`,
		`{"text":"hello","extra":1}`, json.RawMessage(echoSchema)},
}

// echoSchema is the input schema of the echo tool (pkg/tools/demo), which
// orchestrator bench loads; TestDemoToolsTakeTheFastCheck checks that the
// real one gets the fast check.
const echoSchema = `{
	"type": "object",
	"properties": {
		"text": {"type": "string", "description": "The text to return."}
	},
	"required": ["text"],
	"additionalProperties": false
}`

func benchValidate(b *testing.B, invalid bool) {
	for _, fx := range benchFixtures {
		for _, eng := range testEngines {
			b.Run(fx.tool+"/"+eng.name, func(b *testing.B) {
				rt := mustTool(b, eng.compiler, fx.tool, fx.schema)
				input := json.RawMessage(fx.valid)
				if invalid {
					input = json.RawMessage(fx.invalid)
				}
				if err := rt.Validate(input); (err != nil) != invalid {
					b.Fatalf("Validate(%s) = %v", input, err)
				}
				b.ReportAllocs()
				for b.Loop() {
					_ = rt.Validate(input)
				}
			})
		}
	}
}

// BenchmarkValidate validates a valid input: the common case.
func BenchmarkValidate(b *testing.B) { benchValidate(b, false) }

// BenchmarkValidateInvalid validates an invalid input, error list included.
func BenchmarkValidateInvalid(b *testing.B) { benchValidate(b, true) }

// BenchmarkCompile is the cost of registering the search_web schema.
func BenchmarkCompile(b *testing.B) {
	for _, eng := range testEngines {
		b.Run(eng.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := eng.compiler.Compile(SearchWebSchema); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeInput is the decoding every engine starts with.
func BenchmarkDecodeInput(b *testing.B) {
	input := []byte(benchFixtures[0].valid)
	b.ReportAllocs()
	for b.Loop() {
		if _, reason := decodeInput(input); reason != "" {
			b.Fatal(reason)
		}
	}
}
