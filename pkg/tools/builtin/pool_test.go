package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/netguard"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/builtin"
)

// fastRetry keeps the pool's backoff short in tests.
var fastRetry = classify.Policy{MaxAttempts: 3, BaseDelay: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond}

// counted wraps a tool's handler to count its executions.
type counted struct {
	mu sync.Mutex
	n  map[string]int // by call id
}

func (c *counted) wrap(t tools.Tool) tools.Tool {
	h := t.Handler
	t.Handler = func(ctx context.Context, input json.RawMessage) (tools.Output, error) {
		ci, _ := tools.CallInfoFrom(ctx)
		c.mu.Lock()
		c.n[ci.ID]++
		c.mu.Unlock()
		return h(ctx, input)
	}
	t.Retry = fastRetry
	return t
}

func (c *counted) executions(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// poolBundle is a real pool: an embedded JetStream server, one worker
// serving the built-in tools and a dispatcher.
type poolBundle struct {
	d     *dispatch.Dispatcher
	count *counted
	root  string
	web   *testServer
	searx *testServer
}

var poolCallSeq atomic.Int64

func startPool(t *testing.T) *poolBundle {
	t.Helper()
	p := &poolBundle{count: &counted{n: map[string]int{}}, root: t.TempDir()}
	p.web = newTestServer(t, webHandler)
	p.searx = newTestServer(t, searxHandler)

	var ts []tools.Tool
	files, fc, err := builtin.NewFileTools(builtin.FileConfig{Root: p.root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.Close() })
	ts = append(ts, files...)
	ht, hc, err := builtin.NewHTTPRequest(builtin.HTTPConfig{Guard: &netguard.Guard{AllowHosts: []string{p.web.hostport()}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hc.Close() })
	ht.Timeout = time.Second // for the slow server
	ts = append(ts, ht)
	st, sc, err := builtin.NewSearchWeb(builtin.SearchConfig{URL: p.searx.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	ts = append(ts, st)

	reg := tools.NewRegistry()
	for _, tool := range ts {
		if err := reg.Register(p.count.wrap(tool)); err != nil {
			t.Fatal(err)
		}
	}

	srv, nc, j := natstest.StartProvisioned(t)
	wnc := natstest.Connect(t, srv.ClientURL())
	wjs, err := js.New(wnc)
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Config{
		JetStream: wjs, Registry: reg, Logger: natstest.Logger(t),
		DrainTimeout: 5 * time.Second, PublishTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	_ = nc
	p.d, err = dispatch.New(dispatch.Config{JS: j, Catalog: discovery.RegistryCatalog(reg), Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopped, stop := context.WithCancel(context.Background()); stop(); _ = p.d.Stop(stopped) })
	return p
}

// call sends one call through the pool and returns its result.
func (p *poolBundle) call(t *testing.T, tool, input string) (envelope.Result, string) {
	t.Helper()
	id := fmt.Sprintf("toolu_builtin_%d_%d", time.Now().UnixNano(), poolCallSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := p.d.Dispatch(ctx, "", []envelope.ToolUseBlock{{Type: "tool_use", ID: id, Name: tool, Input: json.RawMessage(input)}})
	if err != nil {
		t.Fatalf("dispatch %s: %v", tool, err)
	}
	if len(res) != 1 {
		t.Fatalf("dispatch %s: %d results", tool, len(res))
	}
	return res[0], id
}

// TestThroughThePool runs the built-in tools on a real worker and
// JetStream: permanent errors run once, transient ones are retried until
// they succeed.
func TestThroughThePool(t *testing.T) {
	t.Parallel()
	p := startPool(t)
	if err := os.WriteFile(filepath.Join(p.root, "hello.txt"), []byte("hi there"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, tool, input string
		isError           bool
		class             envelope.Class
		code              string
		executions        int
		content           []string
	}{
		{"read", "read_file", `{"path": "hello.txt"}`, false, "", "", 1, []string{"hi there"}},
		{"missing file", "read_file", `{"path": "missing.txt"}`, true, permanent, classify.CodeNotFound, 1,
			[]string{`"missing.txt"`, "listing the directory"}},
		{"escape", "write_file", `{"path": "../escape.txt", "content": "x"}`, true, permanent, "", 1,
			[]string{"path escapes the workspace"}},
		{"bad encoding", "read_file", `{"path": "hello.txt", "encoding": "ebcdic"}`, true, validation, classify.CodeInvalidArgument, 1,
			[]string{"encoding"}},
		{"503 then 200", "http_request", jsonInput(t, map[string]any{"url": p.web.URL + "/flaky?pool=1"}), false, "", "", 2,
			[]string{"HTTP 200 OK", "recovered"}},
		{"429 then 200", "http_request", jsonInput(t, map[string]any{"url": p.web.URL + "/limited?pool=1"}), false, "", "", 2,
			[]string{"served after waiting"}},
		{"404", "http_request", jsonInput(t, map[string]any{"url": p.web.URL + "/404"}), true, permanent, "http_404", 1,
			[]string{"HTTP 404", "no such page"}},
		{"slow", "http_request", jsonInput(t, map[string]any{"url": p.web.URL + "/slow"}), true, transient, classify.CodeTimeout, 3,
			[]string{"did not answer within 1s (3 attempts)", "dead-lettered"}},
		{"search 503 then 200", "search_web", `{"query": "flaky: pool", "max_results": 2}`, false, "", "", 2,
			[]string{"2 results for", "1. Result 1 for flaky: pool"}},
	}
	var wg sync.WaitGroup
	for _, tc := range tests {
		wg.Go(func() {
			res, id := p.call(t, tc.tool, tc.input)
			text := res.Content.Text()
			if res.IsError != tc.isError || res.Class != tc.class || tc.code != "" && res.Code != tc.code {
				t.Errorf("%s: is_error %v class %q code %q, want %v %q %q\n%s",
					tc.name, res.IsError, res.Class, res.Code, tc.isError, tc.class, tc.code, text)
			}
			if res.Attempts != tc.executions {
				t.Errorf("%s: %d attempts, want %d", tc.name, res.Attempts, tc.executions)
			}
			if n := p.count.executions(id); n != tc.executions {
				t.Errorf("%s: executed %d times, want %d", tc.name, n, tc.executions)
			}
			for _, w := range tc.content {
				if !strings.Contains(text, w) {
					t.Errorf("%s: content %q does not contain %q", tc.name, text, w)
				}
			}
		})
	}
	wg.Wait()

	// The call's trace context reaches the server.
	if res, _ := p.call(t, "http_request", jsonInput(t, map[string]any{"url": p.web.URL + "/echo?trace=1"})); res.IsError {
		t.Fatalf("GET /echo: %s", res.Content.Text())
	}
	req, _ := p.web.lastRequest()
	if tp := req.Header.Get("Traceparent"); len(tp) != 55 || !strings.HasPrefix(tp, "00-") {
		t.Errorf("traceparent sent through the pool = %q, want a W3C traceparent", tp)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(p.root), "escape.txt")); err == nil {
		t.Error("write_file created a file outside the workspace")
	}
}
