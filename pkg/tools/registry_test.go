package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolpool/toolpool/pkg/classify"
)

var objectSchema = json.RawMessage(`{"type":"object"}`)

func TestRegisterRejects(t *testing.T) {
	t.Parallel()
	good := Tool{Name: "search_web", InputSchema: SearchWebSchema, Handler: nopHandler}
	cases := []struct {
		name  string
		edit  func(*Tool)
		want  string // the whole error text
		field string // RegisterError.Field
	}{
		{"space in name", func(tl *Tool) { tl.Name = "search web" },
			`tools: register "search web": name must match ^[a-zA-Z0-9_-]{1,64}$`, "name"},
		{"empty name", func(tl *Tool) { tl.Name = "" },
			`tools: register "": name must match ^[a-zA-Z0-9_-]{1,64}$`, "name"},
		{"dot in name", func(tl *Tool) { tl.Name = "fs.read" },
			`tools: register "fs.read": name must match ^[a-zA-Z0-9_-]{1,64}$`, "name"},
		{"name too long", func(tl *Tool) { tl.Name = strings.Repeat("a", 65) },
			`tools: register "` + strings.Repeat("a", 65) + `": name must match ^[a-zA-Z0-9_-]{1,64}$`, "name"},
		{"non-ASCII name", func(tl *Tool) { tl.Name = "поиск" },
			`tools: register "поиск": name must match ^[a-zA-Z0-9_-]{1,64}$`, "name"},
		{"nil handler", func(tl *Tool) { tl.Handler = nil },
			`tools: register "search_web": handler is nil`, "handler"},
		{"negative timeout", func(tl *Tool) { tl.Timeout = -time.Second },
			`tools: register "search_web": timeout must be >= 0, got -1s`, "timeout"},
		{"negative concurrency", func(tl *Tool) { tl.Concurrency = -1 },
			`tools: register "search_web": concurrency must be >= 0, got -1`, "concurrency"},
		{"no schema", func(tl *Tool) { tl.InputSchema = nil },
			`tools: register "search_web": input schema is empty`, "input_schema"},
		{"schema not JSON", func(tl *Tool) { tl.InputSchema = json.RawMessage(`{"type":`) },
			`tools: register "search_web": input schema is not valid JSON: unexpected end of JSON input`, "input_schema"},
		{"schema not an object", func(tl *Tool) { tl.InputSchema = json.RawMessage(`true`) },
			`tools: register "search_web": input schema must be a JSON object`, "input_schema"},
		{"root type missing", func(tl *Tool) { tl.InputSchema = json.RawMessage(`{"properties":{}}`) },
			`tools: register "search_web": input schema must have "type": "object" at the root`, "input_schema"},
		{"root type string", func(tl *Tool) { tl.InputSchema = json.RawMessage(`{"type":"string"}`) },
			`tools: register "search_web": input schema must have "type": "object" at the root`, "input_schema"},
		{"root type list", func(tl *Tool) { tl.InputSchema = json.RawMessage(`{"type":["object","null"]}`) },
			`tools: register "search_web": input schema must have "type": "object" at the root`, "input_schema"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tl := good
			tc.edit(&tl)
			r := NewRegistry()
			err := r.Register(tl)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Register: %v\nwant %s", err, tc.want)
			}
			// The field and the reason come typed, also through a wrap.
			var re *RegisterError
			if !errors.As(fmt.Errorf("loading: %w", err), &re) || re.Field != tc.field || re.Tool != tl.Name ||
				!strings.HasSuffix(tc.want, re.Reason) || re.Reason == "" {
				t.Errorf("RegisterError of %v: %+v, want field %q and the reason the message ends with", err, re, tc.field)
			}
			if names := r.Names(); len(names) != 0 {
				t.Errorf("rejected tool is registered: %v", names)
			}
		})
	}
}

func TestRegisterRejectsBadSchemaAndPolicy(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	// The metaschema's verdict comes as one line, one "path: reason" per fault.
	err := r.Register(Tool{Name: "t", Handler: nopHandler,
		InputSchema: json.RawMessage(`{"type":"object","required":"a","properties":{"a b":{"minLength":-1}}}`)})
	want := `tools: register "t": input schema: not a valid JSON Schema: ` +
		`properties["a b"].minLength: must be >= 0; required: must be an array, got string`
	if err == nil || err.Error() != want {
		t.Errorf("Register(bad schema):\n got  %v\n want %s", err, want)
	}
	if re := (*RegisterError)(nil); !errors.As(err, &re) || re.Field != "input_schema" ||
		re.Reason != strings.TrimPrefix(want, `tools: register "t": input schema: `) {
		t.Errorf("Register(bad schema): RegisterError %+v, want field input_schema and the engine's reason", re)
	}
	var sve *jsonschema.SchemaValidationError
	if !errors.As(err, &sve) {
		t.Errorf("Register(bad schema): %v does not wrap the engine's error", err)
	}
	err = r.Register(Tool{Name: "t", Handler: nopHandler,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"pattern":"(?<=a)b"}}}`)})
	if err == nil || !strings.Contains(err.Error(), "properties.a.pattern: must be a valid regex (") {
		t.Errorf("Register(bad pattern): %v", err)
	}
	err = r.Register(Tool{Name: "t", Handler: nopHandler,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`)})
	if err == nil || !strings.HasPrefix(err.Error(), `tools: register "t": input schema: `) {
		t.Errorf("Register(dangling $ref): %v", err)
	}
	err = r.Register(Tool{Name: "t", Handler: nopHandler, InputSchema: objectSchema,
		Retry: classify.Policy{BaseDelay: time.Minute, MaxDelay: time.Second}})
	if err == nil || !strings.HasPrefix(err.Error(), `tools: register "t": retry policy: `) ||
		!errors.Is(err, classify.ErrInvalidPolicy) {
		t.Errorf("Register(MaxDelay < BaseDelay): %v", err)
	}
	if re := (*RegisterError)(nil); !errors.As(err, &re) || re.Field != "retry" || !strings.HasSuffix(err.Error(), ": "+re.Reason) {
		t.Errorf("Register(MaxDelay < BaseDelay): RegisterError %+v, want field retry and the policy's reason", re)
	}
	err = r.Register(Tool{Name: "t", Handler: nopHandler, InputSchema: objectSchema,
		Retry: classify.Policy{Jitter: 2}})
	if err == nil || !strings.Contains(err.Error(), "Jitter") {
		t.Errorf("Register(Jitter 2): %v, want the error to name Jitter", err)
	}
}

func TestRegisterAppliesDefaults(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	r.MustRegister(Tool{Name: "plain", InputSchema: objectSchema, Handler: nopHandler})
	r.MustRegister(Tool{Name: "tuned", InputSchema: objectSchema, Handler: nopHandler,
		Timeout: 2 * time.Second, Concurrency: 7, Idempotent: true,
		Retry: classify.Policy{MaxAttempts: 5}})

	plain, _ := r.Lookup("plain")
	if plain.Timeout != TimeoutDefault || plain.Concurrency != ConcurrencyDefault {
		t.Errorf("plain: Timeout %v Concurrency %d, want %v %d", plain.Timeout, plain.Concurrency, TimeoutDefault, ConcurrencyDefault)
	}
	if want := (classify.Policy{}).WithDefaults(); plain.Retry != want {
		t.Errorf("plain: Retry %+v, want %+v", plain.Retry, want)
	}
	tuned, _ := r.Lookup("tuned")
	if tuned.Timeout != 2*time.Second || tuned.Concurrency != 7 || !tuned.Idempotent {
		t.Errorf("tuned: %+v, settings lost", tuned.Tool)
	}
	if tuned.Retry.MaxAttempts != 5 || tuned.Retry.BaseDelay != classify.BaseDelayDefault {
		t.Errorf("tuned: Retry %+v, want MaxAttempts 5 and default delays", tuned.Retry)
	}
}

func TestRegisterDuplicate(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	r.MustRegister(Tool{Name: "echo", InputSchema: objectSchema, Handler: nopHandler})
	err := r.Register(Tool{Name: "echo", InputSchema: objectSchema, Handler: nopHandler})
	if !errors.Is(err, ErrDuplicateTool) {
		t.Fatalf("Register twice: %v, want ErrDuplicateTool", err)
	}
	if want := `tools: register "echo": a tool with this name is already registered`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if re := (*RegisterError)(nil); !errors.As(err, &re) || re.Field != "name" || re.Reason != "is already registered" {
		t.Errorf("duplicate: RegisterError %+v, want field name", re)
	}
	defer func() {
		p := recover()
		err, ok := p.(error)
		if !ok || !errors.Is(err, ErrDuplicateTool) {
			t.Errorf("MustRegister twice panicked with %v, want ErrDuplicateTool", p)
		}
	}()
	r.MustRegister(Tool{Name: "echo", InputSchema: objectSchema, Handler: nopHandler})
	t.Error("MustRegister twice did not panic")
}

func TestLookupNamesDefinitions(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	if _, ok := r.Lookup("x"); ok {
		t.Error("Lookup on an empty registry found a tool")
	}
	if n, d := r.Names(), r.Definitions(); len(n) != 0 || len(d) != 0 {
		t.Errorf("empty registry: Names %v Definitions %v", n, d)
	}
	spaced := json.RawMessage("{\n  \"type\": \"object\",\n  \"properties\": {\"text\": {\"type\": \"string\"}}\n}")
	for _, tl := range []Tool{
		{Name: "write_file", Description: "Writes a file.", InputSchema: WriteFileSchema, Handler: nopHandler},
		{Name: "echo", Description: "Echoes text.", InputSchema: spaced, Handler: nopHandler},
		{Name: "Zed", InputSchema: objectSchema, Handler: nopHandler},
	} {
		r.MustRegister(tl)
	}
	if got, want := r.Names(), []string{"Zed", "echo", "write_file"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	names := r.Names()
	names[0] = "mutated"
	if r.Names()[0] != "Zed" {
		t.Error("Names() returns the registry's own slice")
	}

	got, err := json.Marshal(r.Definitions())
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"name":"Zed","input_schema":{"type":"object"}},` +
		`{"name":"echo","description":"Echoes text.","input_schema":{"type":"object","properties":{"text":{"type":"string"}}}},` +
		`{"name":"write_file","description":"Writes a file.","input_schema":` + compact(t, WriteFileSchema) + `}]`
	if string(got) != want {
		t.Errorf("Definitions() JSON\n got  %s\n want %s", got, want)
	}

	rt, ok := r.Lookup("echo")
	if !ok || rt.Name != "echo" || rt.Description != "Echoes text." {
		t.Fatalf("Lookup(echo) = %+v, %v", rt, ok)
	}
	d := rt.Definition()
	d.InputSchema[0] = 'X'
	if rt.Definition().InputSchema[0] != '{' {
		t.Error("Definition() shares the registry's schema bytes")
	}
}

func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The registry keeps a copy of the schema: the caller may reuse its slice.
func TestRegisterCopiesSchema(t *testing.T) {
	t.Parallel()
	schema := []byte(`{"type":"object","required":["a"]}`)
	r := NewRegistry()
	r.MustRegister(Tool{Name: "t", InputSchema: schema, Handler: nopHandler})
	copy(schema, `{"type":"object","required":["b"]}`)
	rt, _ := r.Lookup("t")
	if string(rt.InputSchema) != `{"type":"object","required":["a"]}` {
		t.Errorf("InputSchema changed with the caller's slice: %s", rt.InputSchema)
	}
}

// Lookups, validations and registrations run together (go test -race).
func TestRegistryConcurrent(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	r.MustRegister(Tool{Name: "search_web", InputSchema: SearchWebSchema, Handler: nopHandler})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 25 {
				r.MustRegister(Tool{Name: fmt.Sprintf("t%d_%d", g, i), InputSchema: objectSchema, Handler: nopHandler})
			}
		})
		wg.Go(func() {
			for range 200 {
				rt, ok := r.Lookup("search_web")
				if !ok {
					t.Error("Lookup(search_web) failed during registrations")
					return
				}
				if err := rt.Validate(json.RawMessage(`{"query":"go"}`)); err != nil {
					t.Error(err)
					return
				}
				if err := rt.Validate(json.RawMessage(`{"query":""}`)); err == nil {
					t.Error("invalid input passed")
					return
				}
				_ = r.Definitions()
			}
		})
	}
	wg.Wait()
	if n := len(r.Names()); n != 101 {
		t.Errorf("%d tools registered, want 101", n)
	}
}

func TestRegisterChecksFairShares(t *testing.T) {
	t.Parallel()
	good := Tool{Name: "search_web", InputSchema: SearchWebSchema, Handler: nopHandler}
	for _, tc := range []struct {
		name  string
		edit  func(*Tool)
		want  string // the whole error text
		field string
	}{
		{"unknown fairness", func(tl *Tool) { tl.Fairness = "user" },
			`tools: register "search_web": fairness must be tenant, session or input.<field> (a top-level field of the input), not "user"`, "fairness"},
		{"input without field", func(tl *Tool) { tl.Fairness = "input." },
			`tools: register "search_web": fairness must name a top-level field of the input after "input." (1 to 64 characters), not "input."`, "fairness"},
		{"nested input field", func(tl *Tool) { tl.Fairness = "input.repo.owner" },
			`tools: register "search_web": fairness names the field "repo.owner", which is not a top-level field name (no '.', spaces or control characters)`, "fairness"},
		{"negative cap", func(tl *Tool) { tl.PerKey.Concurrency = -1 },
			`tools: register "search_web": per_key.concurrency must be >= 0, got -1`, "per_key.concurrency"},
		{"negative rate", func(tl *Tool) { tl.PerKey.Rate = -5 },
			`tools: register "search_web": per_key.rate must be >= 0, got -5`, "per_key.rate"},
		{"negative period", func(tl *Tool) { tl.PerKey = KeyLimits{Rate: 1, Per: -time.Second} },
			`tools: register "search_web": per_key.per must be >= 0, got -1s`, "per_key.per"},
		{"negative burst", func(tl *Tool) { tl.PerKey = KeyLimits{Rate: 1, Burst: -1} },
			`tools: register "search_web": per_key.burst must be >= 0, got -1`, "per_key.burst"},
		{"period without rate", func(tl *Tool) { tl.PerKey.Per = time.Minute },
			`tools: register "search_web": per_key.per is the period of per_key.rate, which is not set`, "per_key.per"},
		{"burst without rate", func(tl *Tool) { tl.PerKey.Burst = 3 },
			`tools: register "search_web": per_key.burst is the burst of per_key.rate, which is not set`, "per_key.burst"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tl := good
			tc.edit(&tl)
			err := NewRegistry().Register(tl)
			var re *RegisterError
			if err == nil || err.Error() != tc.want || !errors.As(err, &re) || re.Field != tc.field {
				t.Fatalf("Register: %v (%+v)\nwant %s (field %s)", err, re, tc.want, tc.field)
			}
		})
	}

	r := NewRegistry()
	for _, tl := range []Tool{
		{Name: "by_repo", Fairness: "input.repo", PerKey: KeyLimits{Concurrency: 8, Rate: 50}},
		{Name: "by_session", Fairness: FairnessSession, PerKey: KeyLimits{Rate: 10, Per: time.Minute, Burst: 2}},
		{Name: "plain"},
	} {
		tl.InputSchema, tl.Handler = objectSchema, nopHandler
		if err := r.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]KeyLimits{
		"by_repo":    {Concurrency: 8, Rate: 50, Per: time.Second, Burst: 50}, // rate defaults: per 1s, burst = rate
		"by_session": {Rate: 10, Per: time.Minute, Burst: 2},
		"plain":      {},
	} {
		rt, _ := r.Lookup(name)
		if rt.PerKey != want {
			t.Errorf("%s: PerKey %+v, want %+v", name, rt.PerKey, want)
		}
	}
	if rt, _ := r.Lookup("by_repo"); rt.Fairness != "input.repo" {
		t.Errorf("Fairness %q", rt.Fairness)
	}
}
