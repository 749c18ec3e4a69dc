package catalog

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/tools"
)

const policyYAML = `tools:
  - name: search
    description: Searches the web.
    input_schema: {type: object, properties: {q: {type: string}}}
    idempotent: true
    cost: 5
    cache: {ttl: 10m, scope: global}
    backend: webhook
    webhook: {url: "http://127.0.0.1:9000/search"}
  - name: read_config
    description: Reads a configuration file.
    input_schema: {type: object}
    hints: {read_only: true}
    cache: {ttl: 1d12h}
    backend: exec
    exec: {command: [cat]}
  - name: write_file
    description: Writes a file.
    input_schema: {type: object}
    approval: always
    backend: exec
    exec: {command: [cat]}
  - name: run
    description: Runs a command on a host.
    input_schema: {type: object}
    approval:
      when:
        input.path: "/etc/**"
        input.target.host: ["*.prod.example", "db.*"]
        input.force: true
      timeout: 30m
    backend: exec
    exec: {command: [cat]}
`

// TestPolicyEntries: cost, cache and approval are read into the entries
// and the tools, with their defaults, in every form the reference shows.
func TestPolicyEntries(t *testing.T) {
	t.Parallel()
	f, err := Parse("tools.yaml", []byte(policyYAML), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := f.Tools(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		cost     int
		cache    *tools.CachePolicy
		approval *tools.ApprovalRule
	}{
		"search":      {5, &tools.CachePolicy{TTL: 10 * time.Minute, Scope: tools.CacheScopeGlobal}, nil},
		"read_config": {0, &tools.CachePolicy{TTL: 36 * time.Hour}, nil},
		"write_file":  {0, nil, &tools.ApprovalRule{}},
		"run": {0, nil, &tools.ApprovalRule{Timeout: 30 * time.Minute, When: []tools.ApprovalMatch{
			{Field: "input.path", Pattern: "/etc/**"},
			{Field: "input.target.host", Pattern: "*.prod.example"},
			{Field: "input.target.host", Pattern: "db.*"},
			{Field: "input.force", Pattern: "true"},
		}}},
	}
	reg := tools.NewRegistry()
	for _, tl := range ts {
		w := want[tl.Name]
		if tl.Cost != w.cost || !reflect.DeepEqual(tl.Cache, w.cache) || !reflect.DeepEqual(tl.Approval, w.approval) {
			t.Errorf("%s: cost %d, cache %+v, approval %+v; want %d, %+v, %+v", tl.Name, tl.Cost, tl.Cache, tl.Approval, w.cost, w.cache, w.approval)
		}
		if err := reg.Register(tl); err != nil {
			t.Errorf("register %s: %v", tl.Name, err)
		}
	}
	run, _ := reg.Lookup("run")
	for input, needs := range map[string]bool{
		`{"path": "/etc/ssh/sshd_config"}`:    true,
		`{"target": {"host": "db.staging"}}`:  true,
		`{"target": {"host": "web.staging"}}`: false,
		`{"force": true}`:                     true,
		`{"path": "/home/me/notes"}`:          false,
	} {
		if got := run.Approval.Requires(json.RawMessage(input)); got != needs {
			t.Errorf("run: Requires(%s) = %v, want %v", input, got, needs)
		}
	}
}

// TestPolicyJSON: the same settings in a JSON catalog.
func TestPolicyJSON(t *testing.T) {
	t.Parallel()
	doc := `{"tools": [{"name": "s", "description": "S.", "input_schema": {"type": "object"}, "idempotent": true,
  "cost": 2, "cache": {"ttl": "90s"}, "approval": {"when": {"input.q": ["a*", "b*"]}},
  "backend": "exec", "exec": {"command": ["cat"]}}]}`
	f, err := Parse("tools.json", []byte(doc), Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := f.Entries[0]
	if e.Cost != 2 || e.Cache == nil || e.Cache.TTL != 90*time.Second || e.Cache.Scope != "" ||
		e.Approval == nil || len(e.Approval.When) != 2 || e.Approval.When[1].Pattern != "b*" {
		t.Errorf("entry: cost %d, cache %+v, approval %+v", e.Cost, e.Cache, e.Approval)
	}
}

// policyBase is a valid exec entry; the table below breaks its policy one
// field at a time.
const policyBase = `tools:
  - name: search
    description: Searches.
    input_schema: {type: object}
    idempotent: true
    cost: 5
    cache:
      ttl: 10m
      scope: tenant
    approval:
      when:
        input.path: "/etc/**"
      timeout: 30m
    backend: exec
    exec: {command: [cat]}
`

func TestPolicyErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		old, new string
		want     string // the whole message
	}{
		{"cost negative", "cost: 5", "cost: -3",
			`tools.yaml:6: tool "search": cost: must be at least 1, got -3 (leave it out for 1 unit per call)`},
		{"cost zero", "cost: 5", "cost: 0",
			`tools.yaml:6: tool "search": cost: must be at least 1, got 0 (leave it out for 1 unit per call)`},
		{"cost huge", "cost: 5", "cost: 1000001",
			`tools.yaml:6: tool "search": cost: must be at most 1000000, got 1000001`},
		{"cost not a number", "cost: 5", "cost: cheap",
			`tools.yaml:6: tool "search": cost: must be an integer, not "cheap"`},
		{"cache not idempotent", "    idempotent: true\n", "",
			`tools.yaml:6: tool "search": cache: needs idempotent: true or hints: {read_only: true}: a cached result is served instead of running the tool again`},
		{"cache read_only false", "    idempotent: true\n", "    hints: {read_only: false}\n",
			`tools.yaml:7: tool "search": cache: needs idempotent: true or hints: {read_only: true}`},
		{"cache idempotent false", "idempotent: true", "idempotent: false",
			`tools.yaml:7: tool "search": cache: needs idempotent: true or hints: {read_only: true}`},
		{"cache without ttl", "      ttl: 10m\n", "",
			`tools.yaml:7: tool "search": cache.ttl: is required: how long a result is kept, such as 30s, 10m or 1d`},
		{"cache ttl not a duration", "ttl: 10m", "ttl: 10",
			`tools.yaml:8: tool "search": cache.ttl: must be a duration such as 30s, 10m, 1h30m or 7d, not "10"`},
		{"cache ttl zero", "ttl: 10m", "ttl: 0s",
			`tools.yaml:8: tool "search": cache.ttl: must be at least 1s, got 0s`},
		{"cache ttl too short", "ttl: 10m", "ttl: 500ms",
			`tools.yaml:8: tool "search": cache.ttl: must be at least 1s, got 500ms`},
		{"cache ttl too long", "ttl: 10m", "ttl: 8d",
			`tools.yaml:8: tool "search": cache.ttl: must be at most 7d (168h0m0s), got 8d`},
		{"cache ttl bad days", "ttl: 10m", "ttl: 1dx",
			`tools.yaml:8: tool "search": cache.ttl: must be a duration such as 30s, 10m, 1h30m or 7d, not "1dx"`},
		{"cache scope", "scope: tenant", "scope: everyone",
			`tools.yaml:9: tool "search": cache.scope: must be tenant (the default: shared within a tenant) or global (shared by every tenant), not "everyone"`},
		{"cache unknown key", "scope: tenant", "scopes: tenant",
			`tools.yaml:9: tool "search": cache.scopes: unknown key (known keys: ttl, scope)`},
		{"cache not a mapping", "    cache:\n      ttl: 10m\n      scope: tenant\n", "    cache: 10m\n",
			`tools.yaml:7: tool "search": cache: must be a mapping, not "10m"`},
		{"approval scalar", "    approval:\n      when:\n        input.path: \"/etc/**\"\n      timeout: 30m\n", "    approval: sometimes\n",
			`tools.yaml:10: tool "search": approval: must be always, or a mapping with when (input fields and the globs that need approval) and timeout, not "sometimes"`},
		{"approval list", "    approval:\n      when:\n        input.path: \"/etc/**\"\n      timeout: 30m\n", "    approval: [always]\n",
			`tools.yaml:10: tool "search": approval: must be always, or a mapping with when`},
		{"approval unknown key", "      timeout: 30m\n", "      timeout: 30m\n      approvers: [alice]\n",
			`tools.yaml:14: tool "search": approval.approvers: unknown key (known keys: when, timeout)`},
		{"approval bad glob", `input.path: "/etc/**"`, `input.path: "/a/[b"`,
			`tools.yaml:12: tool "search": approval.when.input.path: "/a/[b" is not a valid glob: syntax error in pattern`},
		{"approval bad glob in a list", `input.path: "/etc/**"`, `input.path: ["/etc/**", "/a/[b"]`,
			`tools.yaml:12: tool "search": approval.when.input.path[1]: "/a/[b" is not a valid glob: syntax error in pattern`},
		{"approval empty glob", `input.path: "/etc/**"`, `input.path: ""`,
			`tools.yaml:12: tool "search": approval.when.input.path: is empty`},
		{"approval empty list", `input.path: "/etc/**"`, `input.path: []`,
			`tools.yaml:12: tool "search": approval.when.input.path: lists no glob; give at least one`},
		{"approval null glob", `input.path: "/etc/**"`, `input.path:`,
			`tools.yaml:12: tool "search": approval.when.input.path: must be a glob (a string), not empty`},
		{"approval glob a mapping", `input.path: "/etc/**"`, `input.path: {a: b}`,
			`tools.yaml:12: tool "search": approval.when.input.path: must be a glob (a string), not a mapping`},
		{"approval field not input", `input.path: "/etc/**"`, `path: "/etc/**"`,
			`tools.yaml:12: tool "search": approval.when.path: "path" must name a field of the input, as input.path or input.target.host`},
		{"approval field input alone", `input.path: "/etc/**"`, `input.: "/etc/**"`,
			`tools.yaml:12: tool "search": approval.when.input.: "input." must name a field of the input`},
		{"approval field twice", `        input.path: "/etc/**"` + "\n", `        input.path: "/etc/**"` + "\n" + `        input.path: "/var/**"` + "\n",
			`tools.yaml:13: tool "search": approval.when.input.path: appears twice (first at line 12)`},
		{"approval when empty", "      when:\n        input.path: \"/etc/**\"\n", "      when: {}\n",
			`tools.yaml:11: tool "search": approval.when: must be a mapping of input fields to globs, as {input.path: "/etc/**"}, not a mapping (leave when out so that every call needs approval)`},
		{"approval when a list", "      when:\n        input.path: \"/etc/**\"\n", "      when: [input.path]\n",
			`tools.yaml:11: tool "search": approval.when: must be a mapping of input fields to globs`},
		{"approval timeout negative", "timeout: 30m", "timeout: -1m",
			`tools.yaml:13: tool "search": approval.timeout: must be positive, got -1m (leave it out for 15m0s)`},
		{"approval timeout too long", "timeout: 30m", "timeout: 8d",
			`tools.yaml:13: tool "search": approval.timeout: must be at most 7d (168h0m0s), got 8d`},
		{"approval timeout not a duration", "timeout: 30m", "timeout: soon",
			`tools.yaml:13: tool "search": approval.timeout: must be a duration such as 30s, 10m, 1h30m or 7d, not "soon"`},
		{"approval timeout a list", "timeout: 30m", "timeout: [30m]",
			`tools.yaml:13: tool "search": approval.timeout: must be a duration such as 30m or 1d, not a list`},
		{"approval merge key", "      timeout: 30m\n", "      timeout: 30m\n      <<: {when: {}}\n",
			`tools.yaml:14: tool "search": approval: keys must be plain strings (merge keys, <<, are not supported here)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := strings.Replace(policyBase, tc.old, tc.new, 1)
			if src == policyBase {
				t.Fatalf("replacing %q changed nothing", tc.old)
			}
			_, err := Parse("tools.yaml", []byte(src), Options{})
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not *catalog.Error: %v\n%s", err, err, src)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error\n got %s\nwant %s", err, tc.want)
			}
		})
	}
	// The base itself loads, and an approval left empty is none.
	f, err := Parse("tools.yaml", []byte(policyBase), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if e := f.Entries[0]; e.Cost != 5 || e.Cache == nil || e.Approval == nil {
		t.Errorf("base: %+v", e)
	}
	empty := strings.Replace(policyBase, "    approval:\n      when:\n        input.path: \"/etc/**\"\n      timeout: 30m\n", "    approval:\n", 1)
	if f, err := Parse("tools.yaml", []byte(empty), Options{}); err != nil || f.Entries[0].Approval != nil {
		t.Errorf("approval left empty: %v", err)
	}
	aliased := strings.Replace(policyBase, `        input.path: "/etc/**"`, `        input.path: &etc "/etc/**"`+"\n"+`        input.file: *etc`, 1)
	f, err = Parse("tools.yaml", []byte(aliased), Options{})
	if err != nil || len(f.Entries[0].Approval.When) != 2 || f.Entries[0].Approval.When[1].Pattern != "/etc/**" {
		t.Errorf("an alias as a glob: %v", err)
	}
}

// TestPolicyOverBuiltin: a builtin entry lays cost, cache and approval over
// the built-in tool; a cache on a built-in that is neither idempotent nor
// read-only is refused at the cache's line, unless the entry's hints say
// it is read-only.
func TestPolicyOverBuiltin(t *testing.T) {
	t.Parallel()
	src := "tools:\n  - name: fetch\n    backend: builtin\n    cost: 3\n    cache: {ttl: 5m}\n    approval: always\n"
	f, err := Parse("tools.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := f.Tools(map[string]tools.Tool{"fetch": fakeBuiltin("fetch")})
	if err != nil {
		t.Fatal(err)
	}
	if tl := ts[0]; tl.Cost != 3 || tl.Cache == nil || tl.Cache.TTL != 5*time.Minute || tl.Approval == nil {
		t.Errorf("overlay: cost %d, cache %+v, approval %+v", tl.Cost, tl.Cache, tl.Approval)
	}
	if err := f.Apply(tools.NewRegistry(), map[string]tools.Tool{"fetch": fakeBuiltin("fetch")}); err != nil {
		t.Errorf("Apply: %v", err)
	}

	writer := fakeBuiltin("fetch")
	writer.Idempotent = false
	_, err = f.Tools(map[string]tools.Tool{"fetch": writer})
	want := `tools.yaml:5: tool "fetch": cache: needs idempotent: true or hints: {read_only: true}: a cached result is served instead of running the tool again; the built-in tool is neither`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("cache on a built-in that is not idempotent:\n got %v\nwant %s", err, want)
	}
	ro, err := Parse("tools.yaml", []byte(strings.Replace(src, "cost: 3", "hints: {read_only: true}", 1)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Tools(map[string]tools.Tool{"fetch": writer}); err != nil {
		t.Errorf("a built-in the entry says is read-only: %v", err)
	}
	// A built-in's own policy stays when the entry gives none.
	own := fakeBuiltin("fetch")
	own.Cost, own.Approval = 7, &tools.ApprovalRule{}
	plain, _ := Parse("tools.yaml", []byte("tools:\n  - name: fetch\n    backend: builtin\n"), Options{})
	if ts, err := plain.Tools(map[string]tools.Tool{"fetch": own}); err != nil || ts[0].Cost != 7 || ts[0].Approval == nil {
		t.Errorf("the built-in's own policy: %+v, %v", ts, err)
	}
}

// TestPolicyOnMCP: an mcp entry's cost, cache and approval go to every tool
// of its server (the backend's template); a cache is refused only when the
// entry rules out every tool being idempotent or read-only.
func TestPolicyOnMCP(t *testing.T) {
	t.Parallel()
	src := "tools:\n  - name: docs\n    backend: mcp\n    cost: 2\n    cache: {ttl: 1h, scope: global}\n    approval: {timeout: 1h}\n" +
		"    mcp: {url: \"https://mcp.example.com/mcp\"}\n"
	f, err := Parse("tools.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.MCPEntries()[0].MCPBackend()
	if err != nil {
		t.Fatal(err)
	}
	tpl := cfg.Template
	if tpl.Cost != 2 || tpl.Cache == nil || tpl.Cache.Scope != tools.CacheScopeGlobal || tpl.Approval == nil || tpl.Approval.Timeout != time.Hour {
		t.Errorf("template: cost %d, cache %+v, approval %+v", tpl.Cost, tpl.Cache, tpl.Approval)
	}
	bad := strings.Replace(src, "    cost: 2\n", "    idempotent: false\n    hints: {read_only: false}\n", 1)
	_, err = Parse("tools.yaml", []byte(bad), Options{})
	if err == nil || !strings.HasPrefix(err.Error(), `tools.yaml:6: tool "docs": cache: needs tools that are idempotent or read-only, and the entry says its tools are neither`) {
		t.Errorf("cache on an mcp entry whose tools can be neither: %v", err)
	}
	if _, err := Parse("tools.yaml", []byte(strings.Replace(src, "    cost: 2\n", "    idempotent: false\n", 1)), Options{}); err != nil {
		t.Errorf("idempotent: false leaves the server's read-only tools cacheable: %v", err)
	}
}
