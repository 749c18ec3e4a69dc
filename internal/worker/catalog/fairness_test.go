package catalog

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/tools"
)

const fairYAML = `tools:
  - name: review
    description: Reviews a pull request.
    input_schema: {type: object, properties: {repo: {type: string}}}
    fairness: input.repo
    per_key:
      concurrency: 8
      rate: 50
      per: 1m
      burst: 10
    backend: webhook
    webhook: {url: "https://review.example.com/"}
  - name: read_file
    fairness: session
    per_key: {rate: 5}
    backend: builtin
`

func TestFairSharesSettings(t *testing.T) {
	t.Parallel()
	f, err := Parse("tools.yaml", []byte(fairYAML), Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := f.Entry("review")
	if e.Fairness != "input.repo" || e.PerKey != (tools.KeyLimits{Concurrency: 8, Rate: 50, Per: time.Minute, Burst: 10}) {
		t.Errorf("review: fairness %q, per_key %+v", e.Fairness, e.PerKey)
	}
	builtin := tools.Tool{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text(""), nil }}
	reg := tools.NewRegistry()
	if err := f.Apply(reg, map[string]tools.Tool{"read_file": builtin}); err != nil {
		t.Fatal(err)
	}
	review, _ := reg.Lookup("review")
	if review.Fairness != "input.repo" || review.PerKey != e.PerKey {
		t.Errorf("registered review: fairness %q, per_key %+v", review.Fairness, review.PerKey)
	}
	// A rate without a period parses: the registry makes it per second,
	// with a burst of the rate; the built-in tool takes the file's keys.
	rf, _ := reg.Lookup("read_file")
	if rf.Fairness != tools.FairnessSession || rf.PerKey != (tools.KeyLimits{Rate: 5, Per: time.Second, Burst: 5}) {
		t.Errorf("registered read_file: fairness %q, per_key %+v", rf.Fairness, rf.PerKey)
	}
}

func TestFairSharesErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		old, new string
		want     string // the whole message
	}{
		{"bad fairness", "fairness: input.repo", "fairness: user",
			`tools.yaml:5: tool "review": fairness: must be tenant, session or input.<field> (a top-level field of the input), not "user"`},
		{"empty fairness", "fairness: input.repo", "fairness: ''",
			`tools.yaml:5: tool "review": fairness: is empty; leave it out to share between tenants`},
		{"fairness without field", "fairness: input.repo", "fairness: input.",
			`tools.yaml:5: tool "review": fairness: must name a top-level field of the input after "input." (1 to 64 characters), not "input."`},
		{"negative concurrency", "concurrency: 8", "concurrency: -1",
			`tools.yaml:7: tool "review": per_key.concurrency: must be at least 1, got -1 (leave it out for no cap)`},
		{"zero rate", "rate: 50", "rate: 0",
			`tools.yaml:8: tool "review": per_key.rate: must be at least 1, got 0 (leave it out for no rate limit)`},
		{"negative burst", "burst: 10", "burst: -3",
			`tools.yaml:10: tool "review": per_key.burst: must be at least 1, got -3 (leave it out for a burst of rate)`},
		{"bad period", "per: 1m", "per: minute",
			`tools.yaml:9: tool "review": per_key.per: must be a duration such as 500ms, 10s or 1m30s, not "minute"`},
		{"negative period", "per: 1m", "per: -1m",
			`tools.yaml:9: tool "review": per_key.per: must be positive, got -1m`},
		{"period without rate", "      rate: 50\n", "",
			`tools.yaml:8: tool "review": per_key.per: is the period of rate, which is not set: give rate too (calls per period)`},
		{"burst without rate", "      rate: 50\n      per: 1m\n", "",
			`tools.yaml:8: tool "review": per_key.burst: is the burst of rate, which is not set: give rate too`},
		{"no limit", "per_key: {rate: 5}", "per_key: {}",
			`tools.yaml:15: tool "read_file": per_key: sets no limit: give concurrency (calls of one key at once) or rate (calls of one key per period), or leave per_key out`},
		{"rate not a number", "rate: 50", "rate: 50/s",
			`tools.yaml:8: tool "review": per_key.rate: must be an integer, not "50/s"`},
		{"unknown field", "burst: 10", "bursts: 10",
			`tools.yaml:10: tool "review": per_key.bursts: unknown key (known keys: concurrency, rate, per, burst)`},
		{"not a mapping", "per_key: {rate: 5}", "per_key: 5",
			`tools.yaml:15: tool "read_file": per_key: must be a mapping, not "5"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := strings.Replace(fairYAML, tc.old, tc.new, 1)
			if src == fairYAML {
				t.Fatalf("replacing %q changed nothing", tc.old)
			}
			_, err := Parse("tools.yaml", []byte(src), Options{})
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestFairSharesOfMCP: an mcp entry's fairness and per-key limits go to
// every tool of its server.
func TestFairSharesOfMCP(t *testing.T) {
	t.Parallel()
	f, err := Parse("tools.yaml", []byte(`tools:
  - name: gh
    backend: mcp
    fairness: input.owner
    per_key: {concurrency: 2}
    mcp: {url: "https://mcp.example.com/mcp"}
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Entries[0].MCPBackend()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Template.Fairness != "input.owner" || cfg.Template.PerKey != (tools.KeyLimits{Concurrency: 2}) {
		t.Errorf("template: fairness %q, per_key %+v", cfg.Template.Fairness, cfg.Template.PerKey)
	}
}
