package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/promtest"
)

// repoFile is a file of the repository, from this package's directory.
func repoFile(elem ...string) string {
	return filepath.Join(append([]string{"..", ".."}, elem...)...)
}

// jsonLogs collects the JSON log lines of a process.
type jsonLogs struct {
	natstest.LockedBuffer
}

// find returns the first record whose msg is msg.
func (l *jsonLogs) find(msg string) (map[string]any, bool) {
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == msg {
			return rec, true
		}
	}
	return nil, false
}

// startServe runs `orchestrator serve` in this process with an embedded
// server and free ports, and returns the base URL of its HTTP server. It
// stops when the test ends.
func startServe(t *testing.T, extra ...string) string {
	t.Helper()
	tmp := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &jsonLogs{}
	done := make(chan int, 1)
	args := append([]string{
		"--data-dir", filepath.Join(tmp, "data"), "--nats-listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--workspace", filepath.Join(tmp, "ws"), "--workers", "1", "--drain-timeout", "5s", "--log-format", "json",
	}, extra...)
	go func() { done <- run(ctx, append([]string{"serve"}, args...), logs, logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Error("orchestrator serve did not stop")
		}
	})
	ready := false
	defer func() {
		if !ready {
			t.Logf("orchestrator serve's log:\n%s", logs)
		}
	}()
	natstest.Eventually(t, time.Minute, "orchestrator serve to get ready", func() bool {
		select {
		case code := <-done:
			t.Fatalf("orchestrator serve exited with %d:\n%s", code, logs)
		default:
		}
		_, ready = logs.find("toolpool ready")
		return ready
	})
	rec, _ := logs.find("http listening")
	addr, _ := rec["addr"].(string)
	if addr == "" {
		t.Fatalf("no http address in the logs:\n%s", logs)
	}
	return "http://" + addr
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// TestServeObservability runs a scripted mix through serve's HTTP API and
// checks a real scrape of its /metrics: promtool finds nothing to lint, and
// every metric the Grafana dashboard and the alert rules use exists.
func TestServeObservability(t *testing.T) {
	t.Parallel()
	base := startServe(t)
	if code, body := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz: %d %s", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("readyz: %d %s", code, body)
	}
	// The in-process worker announces its tools shortly after start.
	deadline := time.Now().Add(time.Minute)
	for {
		_, body := get(t, base+"/v1/tools")
		if bytes.Contains(body, []byte(`"flaky"`)) && bytes.Contains(body, []byte(`"sleep"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo tools never became live: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The mix: success, validation error, transient then success,
	// exhausted (dead letter), permanent, panic, unknown tool.
	mix := []struct{ tool, input string }{
		{"echo", `{"text":"hi"}`},
		{"sleep", `{"ms":"soon"}`},
		{"flaky", `{"fail":"503","times":1}`},
		{"flaky", `{"fail":"503","times":5}`},
		{"flaky", `{"fail":"404"}`},
		{"flaky", `{"fail":"panic"}`},
		{"no_such_tool", `{}`},
	}
	var blocks []string
	for i, c := range mix {
		blocks = append(blocks, fmt.Sprintf(`{"type":"tool_use","id":"toolu_obs_%d","name":%q,"input":%s}`, i, c.tool, c.input))
	}
	body := `{"role":"assistant","content":[` + strings.Join(blocks, ",") + `]}`
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/tool_calls?timeout=60s", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Toolpool-Session", "observability")
	resp, err := (&http.Client{Timeout: 90 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || bytes.Count(answer, []byte(`"tool_result"`)) != len(mix) {
		t.Fatalf("POST /v1/tool_calls: %s\n%s", resp.Status, answer)
	}

	var text []byte
	var f promtest.Families
	deadline = time.Now().Add(time.Minute)
	for {
		_, text = get(t, base+"/metrics")
		f = promtest.Parse(t, text)
		if f.Value("toolpool_worker_calls_finished_total") == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker's outcomes never added up to 6:\n%s", text)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"toolpool_dispatch_calls_total", nil, 6},
		{"toolpool_dispatch_rejected_total", []string{"tool", "_unknown", "code", "unknown_tool"}, 1},
		{"toolpool_worker_dead_letters_total", []string{"tool", "flaky", "reason", "exhausted"}, 1},
		{"toolpool_dlq_messages", []string{"tool", "flaky"}, 1},
		{"toolpool_http_requests_total", []string{"route", "/v1/tool_calls", "code", "200"}, 1},
		{"toolpool_http_requests_total", []string{"route", "GET /readyz", "code", "200"}, 1},
		{"toolpool_jetstream_up", nil, 1},
	} {
		if got := f.Value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, route := range f.LabelValues("toolpool_http_requests_total", "route") {
		if strings.Contains(route, "?") || strings.Contains(route, "toolu_") {
			t.Errorf("a raw path became a route label: %q", route)
		}
	}

	t.Run("promtool check metrics", func(t *testing.T) {
		promtest.CheckMetrics(t, text)
	})
	t.Run("dashboard", func(t *testing.T) {
		checkDashboard(t, f)
	})
	t.Run("alert rules", func(t *testing.T) {
		checkAlertRules(t, f)
	})
}

// grafanaVars replaces the dashboard's variables with values PromQL
// accepts.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$tool", ".*")

// checkDashboard checks that every metric the dashboard's queries use is
// in the scrape f, and that promtool parses every query.
func checkDashboard(t *testing.T, f promtest.Families) {
	data, err := os.ReadFile(repoFile("deploy", "grafana", "toolpool.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title      string
		Panels     []dashPanel
		Templating struct {
			List []struct {
				Name       string
				Type       string
				Definition string
			}
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	var exprs []string
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type == "query" {
			inner, ok := strings.CutPrefix(v.Definition, "label_values(")
			metric, _, found := strings.Cut(inner, ",")
			if !ok || !found {
				t.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, v.Definition)
				continue
			}
			exprs = append(exprs, strings.TrimSpace(metric))
		}
	}
	if len(exprs) < 15 {
		t.Fatalf("the dashboard has %d queries; expected its panels", len(exprs))
	}
	checkExprs(t, f, exprs)
	// Each query must be valid PromQL: promtool parses them as recording
	// rules.
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		q, _ := json.Marshal(grafanaVars.Replace(e))
		fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	promtest.CheckRules(t, path)
}

type dashPanel struct {
	Type    string
	Title   string
	Targets []struct{ Expr string }
	Panels  []dashPanel
}

// checkExprs checks that every metric exprs use is in the scrape.
func checkExprs(t *testing.T, f promtest.Families, exprs []string) {
	t.Helper()
	var used []string
	for _, e := range exprs {
		names := promtest.MetricNames(grafanaVars.Replace(e))
		if len(names) == 0 {
			t.Errorf("no metric in query %q", e)
		}
		for _, n := range names {
			if !f.Has(n) {
				t.Errorf("query %q uses %s, which the scrape does not have", e, n)
			}
			if !slices.Contains(used, n) {
				used = append(used, n)
			}
		}
	}
	t.Logf("%d metrics used, all in the scrape: %v", len(used), used)
}

// checkAlertRules runs promtool check rules on the alert rules and checks
// that the metrics their expressions use are in the scrape.
func checkAlertRules(t *testing.T, f promtest.Families) {
	path := repoFile("deploy", "prometheus", "alerts.yml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	exprs := ruleExprs(string(data))
	if len(exprs) < 5 {
		t.Fatalf("%s has %d alert expressions, want at least 5", path, len(exprs))
	}
	checkExprs(t, f, exprs)
	promtest.CheckRules(t, path)
}

// ruleExprs returns the expr values of a rules file: inline, or the block
// scalar that follows "expr: |".
func ruleExprs(yaml string) []string {
	var out []string
	lines := strings.Split(yaml, "\n")
	for i := 0; i < len(lines); i++ {
		rest, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "expr:")
		if !ok {
			continue
		}
		rest = strings.TrimSpace(rest)
		if rest != "|" && rest != ">" && rest != "|-" && rest != ">-" {
			out = append(out, rest)
			continue
		}
		indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
		var b strings.Builder
		for i+1 < len(lines) {
			next := lines[i+1]
			if strings.TrimSpace(next) != "" && len(next)-len(strings.TrimLeft(next, " ")) <= indent {
				break
			}
			b.WriteString(next + "\n")
			i++
		}
		out = append(out, b.String())
	}
	return out
}
