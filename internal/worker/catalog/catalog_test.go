package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/tools"
)

// env is a fake environment for Options.LookupEnv.
func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

const goodYAML = `# a catalog
version: 1
tools:
  - name: weather
    description: Current weather for a city.
    input_schema:
      type: object
      properties:
        city: {type: string, minLength: 1}
        days: {type: integer, maximum: 1e1}
      required: [city]
    timeout: 10s
    retry:
      max_attempts: 4
      base_delay: 500ms
      max_delay: 10s
      jitter: 0.2
    idempotent: true
    concurrency: 50
    backend: webhook
    webhook:
      url: https://weather.example.com/v1/now?format=text
      headers:
        Authorization: Bearer ${TOKEN}
        X-Team: tools
      max_output_bytes: 1000
  - name: upper
    description: Upper-cases its input.
    input_schema: {type: object}
    backend: exec
    exec:
      command: [tr, "a-z", "A-Z"]
      env: [LANG]
      dir: .
      term_grace: 250ms
  - name: read_file
    timeout: 3s
    retry: {max_attempts: 5}
    concurrency: 7
    backend: builtin
`

func TestLoadGood(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(path, []byte(goodYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path, Options{LookupEnv: env("TOKEN", "s3cret-token")})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := strings.Join(f.Names(), ","); got != "weather,upper,read_file" {
		t.Fatalf("names %s", got)
	}
	w, _ := f.Entry("weather")
	if w.Line != 4 || w.Timeout != 10*time.Second || !w.Idempotent || w.Concurrency != 50 || w.Backend != BackendWebhook {
		t.Errorf("weather entry: %+v", w)
	}
	if want := (classify.Policy{MaxAttempts: 4, BaseDelay: 500 * time.Millisecond, MaxDelay: 10 * time.Second, Jitter: 0.2}); w.Retry != want {
		t.Errorf("retry %+v, want %+v", w.Retry, want)
	}
	if want := `{"type":"object","properties":{"city":{"type":"string","minLength":1},"days":{"type":"integer","maximum":1e1}},"required":["city"]}`; string(w.InputSchema) != want {
		t.Errorf("schema\n got %s\nwant %s", w.InputSchema, want)
	}
	if w.Webhook.Headers["Authorization"] != "Bearer ${TOKEN}" || w.Webhook.resolved.Get("Authorization") != "Bearer s3cret-token" {
		t.Errorf("headers: template %q", w.Webhook.Headers["Authorization"])
	}
	if w.Webhook.MaxOutputBytes != 1000 {
		t.Errorf("max_output_bytes %d", w.Webhook.MaxOutputBytes)
	}
	u, _ := f.Entry("upper")
	if !filepath.IsAbs(u.Exec.Command[0]) || u.Exec.Command[1] != "a-z" || u.Exec.TermGrace != 250*time.Millisecond ||
		u.Exec.Dir != filepath.Dir(path) || u.Exec.MaxOutputBytes != MaxOutputBytesDefault {
		t.Errorf("exec entry: %+v", u.Exec)
	}
	if u.Timeout != 0 || u.Retry != (classify.Policy{}) {
		t.Errorf("unset settings are not zero: %+v", u)
	}
	// Nothing a File prints holds the secret.
	if s := strings.Join([]string{w.Webhook.URL, w.Webhook.Headers["Authorization"]}, " "); strings.Contains(s, "s3cret") {
		t.Errorf("exported fields hold the secret: %s", s)
	}
}

// TestLoadJSON: the same catalog written as JSON (tab-indented), by
// extension and by content.
func TestLoadJSON(t *testing.T) {
	t.Parallel()
	const doc = "{\n\t\"tools\": [\n\t\t{\n\t\t\t\"name\": \"echo_json\",\n\t\t\t\"description\": \"Returns its input.\",\n" +
		"\t\t\t\"input_schema\": {\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"number\", \"maximum\": 1.50}}},\n" +
		"\t\t\t\"timeout\": \"2s\",\n\t\t\t\"backend\": \"exec\",\n\t\t\t\"exec\": {\"command\": [\"cat\"]}\n\t\t}\n\t]\n}\n"
	for _, name := range []string{"tools.json", "tools.conf"} {
		f, err := Parse(name, []byte(doc), Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		e := f.Entries[0]
		if e.Name != "echo_json" || e.Timeout != 2*time.Second || string(e.InputSchema) != `{"type":"object","properties":{"n":{"type":"number","maximum":1.50}}}` {
			t.Errorf("%s: %+v %s", name, e, e.InputSchema)
		}
	}
	// Bad JSON names the line.
	_, err := Parse("tools.json", []byte("{\n\"tools\": [\n{\"name\": \"x\",}\n]}"), Options{})
	var ce *Error
	if !errors.As(err, &ce) || ce.Line != 3 || !strings.Contains(err.Error(), "tools.json:3: not valid JSON") {
		t.Errorf("bad JSON: %v", err)
	}
	// An unknown key in JSON has a line too.
	_, err = Parse("tools.json", []byte("{\"tools\": [\n{\"name\": \"x\", \"description\": \"d\", \"backend\": \"exec\",\n \"exec\": {\"command\": [\"cat\"], \"shell\": true}}]}"), Options{})
	if err == nil || !strings.Contains(err.Error(), `tools.json:3: tool "x": exec.shell: unknown key`) {
		t.Errorf("unknown JSON key: %v", err)
	}
}

// base is a valid webhook entry; the table below breaks it one field at a
// time.
const base = `tools:
  - name: weather
    description: Current weather.
    input_schema:
      type: object
    timeout: 10s
    retry:
      max_attempts: 3
    concurrency: 5
    backend: webhook
    webhook:
      url: https://weather.example.com/now
      headers:
        Authorization: Bearer ${TOKEN}
`

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		old  string // replaced in base by new
		new  string
		want string // the whole message
	}{
		{"max_attempts 0", "max_attempts: 3", "max_attempts: 0",
			`tools.yaml:8: tool "weather": retry.max_attempts: must be between 1 and 100, got 0`},
		{"max_attempts 101", "max_attempts: 3", "max_attempts: 101",
			`tools.yaml:8: tool "weather": retry.max_attempts: must be between 1 and 100, got 101`},
		{"max_attempts not a number", "max_attempts: 3", "max_attempts: three",
			`tools.yaml:8: tool "weather": retry.max_attempts: must be an integer, not "three"`},
		{"jitter", "max_attempts: 3", "jitter: 1.5",
			`tools.yaml:8: tool "weather": retry.jitter: must be between 0 and 1 (a fraction of the delay), got 1.5`},
		{"base_delay above max_delay", "max_attempts: 3", "base_delay: 2s\n      max_delay: 1s",
			`tools.yaml:9: tool "weather": retry.max_delay: must be at least base_delay (2s)`},
		{"base_delay above default max_delay", "max_attempts: 3", "base_delay: 1m",
			`tools.yaml:8: tool "weather": retry.base_delay: must be at most max_delay (30s by default); set retry.max_delay too`},
		{"bad delay", "max_attempts: 3", "base_delay: soon",
			`tools.yaml:8: tool "weather": retry.base_delay: must be a duration such as 500ms, 10s or 1m30s, not "soon"`},
		{"timeout not a duration", "timeout: 10s", "timeout: 10",
			`tools.yaml:6: tool "weather": timeout: must be a duration such as 500ms, 10s or 1m30s, not "10"`},
		{"timeout negative", "timeout: 10s", "timeout: -1s",
			`tools.yaml:6: tool "weather": timeout: must be positive, got -1s`},
		{"concurrency", "concurrency: 5", "concurrency: 0",
			`tools.yaml:9: tool "weather": concurrency: must be at least 1, got 0`},
		{"name missing", "  - name: weather\n", "  - backend_x: 1\n",
			`tools.yaml:2: tool #1: backend_x: unknown key (known keys: name, description, input_schema, timeout, retry, idempotent, hints, concurrency, pause_on_rate_limit_above, fairness, per_key, cost, cache, approval, backend, webhook, exec, mcp)`},
		{"name bad", "name: weather", "name: get weather",
			`tools.yaml:2: tool "get weather": name: must be 1 to 64 letters, digits, '_' or '-' (^[a-zA-Z0-9_-]{1,64}$), as the Messages API requires`},
		{"description missing", "    description: Current weather.\n", "",
			`tools.yaml:2: tool "weather": description: is required: the model reads it to decide when to call the tool`},
		{"schema missing", "    input_schema:\n      type: object\n", "",
			`tools.yaml:2: tool "weather": input_schema: is required: a JSON Schema object such as {type: object, properties: {…}}`},
		{"schema not object", "type: object", "type: array",
			`tools.yaml:4: tool "weather": input_schema: must have "type": "object" at the root`},
		{"schema does not compile", "type: object", "type: object\n      properties: {a: {type: strnig}}",
			`tools.yaml:4: tool "weather": input_schema: `},
		{"backend missing", "    backend: webhook\n", "",
			`tools.yaml:2: tool "weather": backend: is required: one of webhook, exec, builtin`},
		{"backend unknown", "backend: webhook", "backend: lambda",
			`tools.yaml:10: tool "weather": backend: must be one of webhook, exec, builtin, mcp, not "lambda"`},
		{"settings of another backend", "backend: webhook", "backend: exec",
			`tools.yaml:10: tool "weather": backend: is exec, but the entry has no exec settings`},
		{"url missing", "url: https://weather.example.com/now", "url: ''",
			`tools.yaml:12: tool "weather": webhook.url: is required: the URL that receives the POST`},
		{"url scheme", "url: https://weather.example.com/now", "url: ftp://weather.example.com/now",
			`tools.yaml:12: tool "weather": webhook.url: must be an http or https URL, not "ftp"`},
		{"url credentials", "url: https://weather.example.com/now", "url: https://me:pw@weather.example.com/now",
			`tools.yaml:12: tool "weather": webhook.url: must not carry credentials; send them in a header whose value is ${ENV_NAME}`},
		{"unknown key with line", "      url:", "      hedaers: {}\n      url:",
			`tools.yaml:12: tool "weather": webhook.hedaers: unknown key (known keys: url, headers, max_output_bytes)`},
		{"unknown top-level key", "tools:\n", "tool:\n  - name: x\ntools:\n",
			`tools.yaml:1: tool: unknown key (known keys: version, tools)`},
		{"reserved header", "Authorization:", "Toolpool-Call-Id:",
			`tools.yaml:14: tool "weather": webhook.headers.Toolpool-Call-Id: is set by toolpool itself and cannot be configured`},
		{"env var missing", "${TOKEN}", "${NO_SUCH_TOKEN}",
			`tools.yaml:14: tool "weather": webhook.headers.Authorization: refers to environment variable NO_SUCH_TOKEN, which is not set`},
		{"env var empty", "${TOKEN}", "${EMPTY}",
			`tools.yaml:14: tool "weather": webhook.headers.Authorization: refers to environment variable EMPTY, which is empty`},
		{"env ref unclosed", "${TOKEN}", "${TOKEN",
			`tools.yaml:14: tool "weather": webhook.headers.Authorization: has a "${" without its closing "}"`},
		{"duplicate key", "    concurrency: 5\n", "    concurrency: 5\n    concurrency: 6\n",
			`tools.yaml:10: tool "weather": key "concurrency" appears twice (first at line 9)`},
		{"wrong shape", "    retry:\n      max_attempts: 3\n", "    retry: [3]\n",
			`tools.yaml:7: tool "weather": retry: must be a mapping, not a list`},
		{"idempotent not bool", "    concurrency: 5\n", "    concurrency: 5\n    idempotent: maybe\n",
			`tools.yaml:10: tool "weather": idempotent: must be true or false, not "maybe"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := strings.Replace(base, tc.old, tc.new, 1)
			if src == base {
				t.Fatalf("replacing %q changed nothing", tc.old)
			}
			_, err := Parse("tools.yaml", []byte(src), Options{LookupEnv: env("TOKEN", "tok-123", "EMPTY", "")})
			if err == nil {
				t.Fatalf("no error for\n%s", src)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not *catalog.Error: %v", err, err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error\n got %s\nwant %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "tok-123") {
				t.Errorf("error shows the secret: %s", err)
			}
			if strings.Contains(err.Error(), "catalog.") || strings.Contains(err.Error(), "Spec") {
				t.Errorf("error shows a Go type: %s", err)
			}
		})
	}
}

func TestLoadExecErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.txt")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	entry := func(exec string) string {
		return "tools:\n  - name: run\n    description: Runs.\n    input_schema: {type: object}\n    backend: exec\n    exec:\n" + exec
	}
	cases := []struct{ exec, want string }{
		{"      command: []\n", `tool "run": exec.command: is required`},
		{"      command: [no-such-program-xyz]\n", `tool "run": exec.command[0]: "no-such-program-xyz" is not found in PATH; give its full path`},
		{"      command: [./missing.sh]\n", `tool "run": exec.command[0]: "./missing.sh" cannot be used: no such file or directory`},
		{"      command: [./plain.txt]\n", `tool "run": exec.command[0]: "./plain.txt" is not executable (chmod +x it)`},
		{"      command: [cat]\n      env: [\"A=b\"]\n", `tool "run": exec.env[0]: "A=b" is not an environment variable name; list names only, not NAME=value`},
		{"      command: [cat]\n      dir: nowhere\n", `tool "run": exec.dir: "nowhere" cannot be used: no such file or directory`},
		{"      command: [cat]\n      term_grace: 2m\n", `tool "run": exec.term_grace: must be positive and at most 1m0s, got 2m`},
		{"      command: [cat]\n      max_output_bytes: 0\n", `tool "run": exec.max_output_bytes: must be between 1 and 8388608, got 0`},
		{"      command: cat\n", `tool "run": exec.command: must be a list of strings, not "cat"`},
	}
	for _, tc := range cases {
		_, err := Parse(filepath.Join(dir, "tools.yaml"), []byte(entry(tc.exec)), Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v\nwant it to contain %s", tc.exec, err, tc.want)
		}
	}
}

func TestLoadFileErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ src, want string }{
		{"", "tools.yaml: the file is empty"},
		{"tools: []\n", "tools.yaml:1: tools: lists no tools; give at least one"},
		{"version: 2\ntools: []\n", "tools.yaml:1: version: must be 1"},
		{"tools:\n  - name: a\n    backend: builtin\nextra: 1\n", "tools.yaml:4: extra: unknown key (known keys: version, tools)"},
		{"tools:\n  - name: [x\n", "tools.yaml:1: not valid YAML: did not find expected ',' or ']'"},
		{"- a\n- b\n", `tools.yaml:1: must be a mapping with a list of tools under "tools"`},
		{"tools:\n  - name: a\n    description: d\n    backend: builtin\n  - name: a\n    backend: builtin\n",
			`tools.yaml:5: tool "a": name: is already used by the tool at line 2; tool names must be unique`},
		{"tools:\n  - name: a\n    backend: builtin\n    input_schema: {type: object}\n",
			`tools.yaml:4: tool "a": input_schema: is not allowed with backend builtin`},
		{"tools:\n  - name: a\n    backend: builtin\n    idempotent: true\n",
			`tools.yaml:4: tool "a": idempotent: is not allowed with backend builtin`},
		{"tools:\n  - name: a\n    backend: builtin\n    exec: {command: [cat]}\n",
			`tools.yaml:4: tool "a": exec: is not allowed with backend builtin`},
	} {
		_, err := Parse("tools.yaml", []byte(tc.src), Options{})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: error %v\nwant %s…", tc.src, err, tc.want)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), Options{}); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

// TestExampleCatalog loads the catalog shipped in examples/ and registers it
// with stand-ins for the built-in tools it overrides.
func TestExampleCatalog(t *testing.T) {
	t.Parallel()
	f, err := Load(filepath.Join("..", "..", "..", "examples", "tools.yaml"), Options{LookupEnv: env("WEATHER_API_TOKEN", "example-token")})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	backends := map[Backend]bool{}
	for _, e := range f.Entries {
		backends[e.Backend] = true
	}
	if len(backends) != 4 {
		t.Errorf("the example uses backends %v; want all four", backends)
	}
	builtins := map[string]tools.Tool{}
	for _, e := range f.Entries {
		if e.Backend == BackendBuiltin {
			builtins[e.Name] = fakeBuiltin(e.Name)
		}
	}
	reg := tools.NewRegistry()
	if err := f.Apply(reg, builtins); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	// An mcp entry's tools are its server's: StartMCP registers them.
	if got, want := len(reg.Names()), len(f.Entries)-len(f.MCPEntries()); got != want {
		t.Errorf("%d tools registered, want %d", got, want)
	}
}

func fakeBuiltin(name string) tools.Tool {
	return tools.Tool{
		Name:        name,
		Description: "built-in " + name,
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Timeout:     time.Minute,
		Retry:       classify.Policy{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: 30 * time.Second},
		Idempotent:  true,
		Concurrency: 10,
		Handler: func(context.Context, json.RawMessage) (tools.Output, error) {
			return tools.Text(name), nil
		},
	}
}

func TestApplyBuiltinOverrides(t *testing.T) {
	t.Parallel()
	f, err := Parse("tools.yaml", []byte(goodYAML), Options{LookupEnv: env("TOKEN", "x-token")})
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	if err := f.Apply(reg, map[string]tools.Tool{"read_file": fakeBuiltin("read_file")}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	rt, ok := reg.Lookup("read_file")
	if !ok {
		t.Fatal("read_file not registered")
	}
	// Given: timeout, max_attempts, concurrency. Kept: the rest.
	if rt.Timeout != 3*time.Second || rt.Retry.MaxAttempts != 5 || rt.Concurrency != 7 ||
		rt.Retry.BaseDelay != time.Second || rt.Description != "built-in read_file" || !rt.Idempotent {
		t.Errorf("overlaid tool: timeout %v retry %+v concurrency %d description %q idempotent %v",
			rt.Timeout, rt.Retry, rt.Concurrency, rt.Description, rt.Idempotent)
	}

	// A builtin entry naming no built-in tool.
	err = f.Apply(tools.NewRegistry(), map[string]tools.Tool{"list_dir": fakeBuiltin("list_dir")})
	if err == nil || !strings.Contains(err.Error(), `tools.yaml:36: tool "read_file": name: there is no built-in tool by this name (built-in tools: list_dir)`) {
		t.Errorf("missing built-in: %v", err)
	}
	// A duplicate with a tool already registered.
	reg = tools.NewRegistry()
	reg.MustRegister(fakeBuiltin("upper"))
	err = f.Apply(reg, map[string]tools.Tool{"read_file": fakeBuiltin("read_file")})
	if err == nil || !strings.Contains(err.Error(), `tool "upper": name: is already registered`) {
		t.Errorf("duplicate: %v", err)
	}
	// Overrides that do not fit the built-in's own settings.
	slow, err := Parse("tools.yaml", []byte("tools:\n  - name: read_file\n    backend: builtin\n    retry: {max_delay: 100ms}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = slow.Apply(tools.NewRegistry(), map[string]tools.Tool{"read_file": fakeBuiltin("read_file")})
	if err == nil || !strings.Contains(err.Error(), `tools.yaml:2: tool "read_file": retry.max_delay: must be at least base_delay (1s, the built-in tool's)`) {
		t.Errorf("misfitting override: %v", err)
	}
}

// An entry's hints: what MCP hosts are told the tool does to the world;
// the ones not given stay unknown.
func TestHints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(path, []byte(`tools:
  - name: lookup
    description: Looks a word up.
    input_schema: {type: object}
    hints: {read_only: true, open_world: false}
    backend: exec
    exec: {command: [cat]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	if err := f.Apply(reg, nil); err != nil {
		t.Fatal(err)
	}
	rt, _ := reg.Lookup("lookup")
	h := rt.Hints
	if h.ReadOnly == nil || !*h.ReadOnly || h.OpenWorld == nil || *h.OpenWorld || h.Destructive != nil {
		t.Errorf("hints = read_only %v, open_world %v, destructive %v; want true, false, unknown", h.ReadOnly, h.OpenWorld, h.Destructive)
	}
	if err := os.WriteFile(path, []byte("tools:\n  - name: x\n    hints: {read_only: yes please}\n    backend: exec\n    exec: {command: [cat]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, Options{}); err == nil || !strings.Contains(err.Error(), "hints.read_only") {
		t.Errorf("a hint that is not true or false: err = %v; want one naming hints.read_only", err)
	}
}
