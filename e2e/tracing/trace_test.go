package tracing_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/proctest"
)

// waitLong bounds every wait for something that should happen: generous,
// because the machine is shared.
const waitLong = 90 * time.Second

// The tool of the test, its call's id, and the services' default names.
const (
	tool          = "lookup"
	callID        = "toolu_trace_01"
	orchService   = "toolpool-orchestrator"
	workerService = "toolpool-worker"
)

// Span names (docs/observability.md lists them).
const (
	spanRequest = "POST /v1/tool_calls"
	spanCall    = "call " + tool
	spanExecute = "execute_tool " + tool
	spanQueued  = "queued " + tool
)

// flakyService is the webhook's downstream: it holds its first request
// until the test releases it and answers it 503 (a transient failure),
// and answers every later one 200. It records each request's traceparent.
type flakyService struct {
	srv     *httptest.Server
	first   chan struct{} // closed when the first request has arrived
	release chan struct{} // closed to let the first request answer
	once    sync.Once

	mu           sync.Mutex
	traceparents []string
}

func newFlakyService(t *testing.T) *flakyService {
	f := &flakyService{first: make(chan struct{}), release: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.let()
		f.srv.Close()
	})
	return f
}

func (f *flakyService) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	f.traceparents = append(f.traceparents, r.Header.Get("traceparent"))
	n := len(f.traceparents)
	f.mu.Unlock()
	if n == 1 {
		close(f.first)
		select {
		case <-f.release:
		case <-r.Context().Done():
		}
		http.Error(w, "the records service is restarting", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"order":"order-42","status":"shipped"}`)
}

// let releases the first request.
func (f *flakyService) let() { f.once.Do(func() { close(f.release) }) }

// requests are the traceparent headers of the requests so far.
func (f *flakyService) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.traceparents...)
}

// catalog is the workers' catalog: the webhook tool, retried after 300 ms.
func catalog(url string) string {
	return fmt.Sprintf(`version: 1
tools:
  - name: %s
    description: Looks an order up in the records service.
    input_schema:
      type: object
      properties:
        order: {type: string, minLength: 1}
      required: [order]
      additionalProperties: false
    timeout: 30s
    idempotent: true
    retry: {max_attempts: 3, base_delay: 300ms, max_delay: 1s}
    backend: webhook
    webhook: {url: %q}
`, tool, url)
}

// tracedPool is the pool as processes exporting to a Jaeger.
type tracedPool struct {
	t       *testing.T
	jaeger  *jaeger
	natsURL string
	apiURL  string
	catalog string
	orch    *proctest.Proc
	client  *http.Client
}

// env is a process's environment: tracing on, exporting to Jaeger, with
// extra resource attributes when given.
func (p *tracedPool) env(dir string, extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + p.jaeger.otlpURL}, extra...)
}

// startPool starts Jaeger and `orchestrator serve --workers 0` (embedded
// NATS) exporting to it, and writes the workers' catalog.
func startPool(t *testing.T, hookURL string) *tracedPool {
	t.Helper()
	dir := t.TempDir()
	p := &tracedPool{t: t, jaeger: startJaeger(t), client: &http.Client{}}
	t.Cleanup(p.client.CloseIdleConnections)
	natsAddr, httpAddr := natstest.FreeAddr(t), natstest.FreeAddr(t)
	p.natsURL, p.apiURL = "nats://"+natsAddr, "http://"+httpAddr
	p.catalog = filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(p.catalog, []byte(catalog(hookURL)), 0o644); err != nil {
		t.Fatal(err)
	}
	p.orch = proctest.Command{Name: "orchestrator", Path: orchestratorBin, Env: p.env(dir), Dir: dir, LogTail: 8000,
		Args: []string{"serve", "--data-dir", filepath.Join(dir, "data"), "--nats-listen", natsAddr, "--http", httpAddr,
			"--workers", "0", "--drain-timeout", "5s", "--http-drain-timeout", "5s"}}.Start(t)
	p.orch.WaitHTTP(p.apiURL+"/readyz", waitLong)
	return p
}

// worker is one worker process and its /readyz.
type worker struct {
	proc    *proctest.Proc
	readyz  string
	id      string
	process string // its service.instance.id
}

// startWorker starts a worker process serving the catalog as id, with
// service.instance.id process, and waits until the orchestrator lists the
// tool.
func (p *tracedPool) startWorker(id, process string) *worker {
	p.t.Helper()
	dir := p.t.TempDir()
	metrics := natstest.FreeAddr(p.t)
	w := &worker{readyz: "http://" + metrics + "/readyz", id: id, process: process}
	w.proc = proctest.Command{Name: "worker " + id, Path: workerBin, Dir: dir, LogTail: 8000,
		Env: p.env(dir, "OTEL_RESOURCE_ATTRIBUTES=service.instance.id="+process),
		Args: []string{"--nats-url", p.natsURL, "--tools", p.catalog, "--builtin-tools=none", "--id", id,
			"--metrics", metrics, "--drain-timeout", "30s"}}.Start(p.t)
	w.proc.WaitHTTP(w.readyz, waitLong)
	w.proc.Eventually(waitLong, "the orchestrator to list "+tool, func() bool {
		resp, err := p.client.Get(p.apiURL + "/v1/tools")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"`+tool+`"`)
	})
	return w
}

// draining waits until the worker, sent SIGTERM, reports it is not ready:
// it pulls no more calls.
func (p *tracedPool) draining(w *worker) {
	p.t.Helper()
	w.proc.Eventually(waitLong, w.id+" to stop being ready", func() bool {
		resp, err := p.client.Get(w.readyz)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode != http.StatusOK
	})
}

// stop sends SIGTERM to a process and waits for it to exit 0 (flushing
// its spans on the way out).
func stop(t *testing.T, p *proctest.Proc) {
	t.Helper()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("%s: SIGTERM: %v", p.Name(), err)
	}
	if code := p.Wait(waitLong); code != 0 {
		t.Fatalf("%s exited %d after SIGTERM, want 0", p.Name(), code)
	}
}

// answer is the HTTP API's answer to the call.
type answer struct {
	status      int
	traceparent string
	body        string
	err         error
}

// call posts the tool call in the Anthropic format and waits for the
// answer.
func (p *tracedPool) call(ctx context.Context) answer {
	body := fmt.Sprintf(`{"role":"assistant","content":[{"type":"tool_use","id":%q,"name":%q,"input":{"order":"order-42"}}]}`, callID, tool)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.apiURL+"/v1/tool_calls?timeout=120s", bytes.NewReader([]byte(body)))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Toolpool-Session", "trace-demo")
	resp, err := p.client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, traceparent: resp.Header.Get("Traceparent"), body: string(data), err: err}
}

// One call whose first attempt fails on worker A and whose second succeeds
// on worker B is one trace in Jaeger: the orchestrator's request and call
// spans, and one execute_tool span per attempt from each worker process,
// children of the call span, the failed one with error.type and a retry
// event; the webhook's requests carry their attempt's span as parent.
func TestTraceAcrossWorkers(t *testing.T) {
	needJaeger(t)
	chromium := startBrowser(t) // for the screenshot at the end
	hook := newFlakyService(t)
	p := startPool(t, hook.srv.URL+"/orders")
	a := p.startWorker("worker-a", "worker-a")

	ctx, cancel := context.WithTimeout(context.Background(), 3*waitLong)
	defer cancel()
	answered := make(chan answer, 1)
	go func() { answered <- p.call(ctx) }()

	// Attempt 1 reaches the service on A. A is told to stop while it
	// runs: it pulls nothing more, and the failure it then reports is
	// retried after the backoff, by B, started once A has exited.
	select {
	case <-hook.first:
	case <-time.After(waitLong):
		t.Fatalf("the webhook saw no request within %v", waitLong)
	}
	if err := a.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.draining(a)
	hook.let()
	if code := a.proc.Wait(waitLong); code != 0 {
		t.Fatalf("worker-a exited %d after SIGTERM, want 0", code)
	}
	b := p.startWorker("worker-b", "worker-b")

	var ans answer
	select {
	case ans = <-answered:
	case <-time.After(2 * waitLong):
		t.Fatalf("no answer within %v", 2*waitLong)
	}
	if ans.err != nil || ans.status != http.StatusOK || strings.Contains(ans.body, `"is_error"`) || !strings.Contains(ans.body, "shipped") {
		t.Fatalf("answer: HTTP %d, %v: %s; want 200 with the service's record", ans.status, ans.err, ans.body)
	}
	if n := len(hook.requests()); n != 2 {
		t.Fatalf("the webhook saw %d requests, want 2 (one per attempt)", n)
	}
	// Stopped processes have flushed their spans.
	stop(t, b.proc)
	stop(t, p.orch)

	tr := p.waitTrace(t)
	t.Logf("%s", tr.summary())
	checkTrace(t, tr, ans, hook.requests(), a, b)
	t.Run("screenshot", func(t *testing.T) { screenshotTrace(t, chromium, p.jaeger, tr) })
}

// waitTrace polls the query API until the trace holding the call's spans
// has the request, call, queued and both execute_tool spans, and returns it;
// searching by either service finds it.
func (p *tracedPool) waitTrace(t *testing.T) *jTrace {
	t.Helper()
	ctx := context.Background()
	var found *jTrace
	last := "nothing yet"
	for deadline := time.Now().Add(waitLong); found == nil; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger does not hold the call's whole trace after %v; last seen: %s", waitLong, last)
		}
		traces, err := p.jaeger.traces(ctx, orchService, spanCall)
		if err != nil {
			last = err.Error()
			continue
		}
		last = fmt.Sprintf("%d traces of %s with a span %q, none of call %s", len(traces), orchService, spanCall, callID)
		for i := range traces {
			tr := &traces[i]
			if !tr.hasCall() {
				continue
			}
			last = tr.summary()
			if len(tr.named(spanRequest)) > 0 && len(tr.named(spanCall)) > 0 && len(tr.named(spanQueued)) > 0 && len(tr.named(spanExecute)) >= 2 {
				found = tr
			}
			break
		}
	}
	workers, err := p.jaeger.traces(ctx, workerService, spanExecute)
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	for i := range workers {
		seen = seen || workers[i].TraceID == found.TraceID
	}
	if !seen {
		t.Errorf("searching %s's traces does not find trace %s", workerService, found.TraceID)
	}
	return found
}

// hasCall reports whether a span of the trace is about the test's call.
func (tr *jTrace) hasCall() bool {
	for i := range tr.Spans {
		if tr.Spans[i].tag(string(tracing.GenAIToolCallID)) == callID {
			return true
		}
	}
	return false
}

// checkTrace asserts what the trace must show.
func checkTrace(t *testing.T, tr *jTrace, ans answer, hookTraceparents []string, a, b *worker) {
	t.Helper()
	if sc, ok := tracing.ParseTraceparent(ans.traceparent); !ok || sc.TraceID().String() != tr.TraceID {
		t.Errorf("the answer's Traceparent %q is not of trace %s", ans.traceparent, tr.TraceID)
	}
	req := one(t, tr, spanRequest)
	if s := tr.service(req); s != orchService || req.tag("span.kind") != "server" || req.tag(string(tracing.Front)) != "http" {
		t.Errorf("%q: service %s, kind %q, %s %q; want %s, server, http", spanRequest, s, req.tag("span.kind"), tracing.Front, req.tag(string(tracing.Front)), orchService)
	}
	call := one(t, tr, spanCall)
	if s := tr.service(call); s != orchService || call.parent() != req.SpanID {
		t.Errorf("%q: service %s, parent %s; want %s, the request span %s", spanCall, s, call.parent(), orchService, req.SpanID)
	}
	for key, want := range map[string]string{string(tracing.GenAIToolName): tool, string(tracing.GenAIToolCallID): callID} {
		if got := call.tag(key); got != want {
			t.Errorf("%q: %s = %q, want %q", spanCall, key, got, want)
		}
	}
	if et := call.tag(string(tracing.ErrorType)); et != "" {
		t.Errorf("%q: error.type %q on a call that succeeded", spanCall, et)
	}

	attempts := tr.named(spanExecute)
	if len(attempts) != 2 {
		t.Fatalf("%d %q spans, want 2 (one per attempt)", len(attempts), spanExecute)
	}
	for i, w := range []*worker{a, b} {
		s := attempts[i]
		what := fmt.Sprintf("attempt %d (%q)", i+1, spanExecute)
		proc := tr.Processes[s.ProcessID]
		if proc.ServiceName != workerService || kv(proc.Tags, "service.instance.id") != w.process {
			t.Errorf("%s: reported by %s/%s, want %s/%s", what, proc.ServiceName, kv(proc.Tags, "service.instance.id"), workerService, w.process)
		}
		if s.parent() != call.SpanID {
			t.Errorf("%s: parent %s, want the call span %s", what, s.parent(), call.SpanID)
		}
		want := map[string]string{
			string(tracing.GenAIOperationName): tracing.ExecuteTool, string(tracing.GenAIToolName): tool,
			string(tracing.GenAIToolCallID): callID, string(tracing.Attempt): fmt.Sprint(i + 1),
		}
		for key, v := range want {
			if got := s.tag(key); got != v {
				t.Errorf("%s: %s = %q, want %q", what, key, got, v)
			}
		}
		if id := s.tag(string(tracing.WorkerID)); !strings.HasPrefix(id, w.id) {
			t.Errorf("%s: %s = %q, want %s's", what, tracing.WorkerID, id, w.id)
		}
		// The webhook's request carried the attempt's span as its parent.
		if i < len(hookTraceparents) {
			sc, ok := tracing.ParseTraceparent(hookTraceparents[i])
			if !ok || sc.TraceID().String() != tr.TraceID || sc.SpanID().String() != s.SpanID {
				t.Errorf("%s: the webhook's request carried traceparent %q, want trace %s, parent %s", what, hookTraceparents[i], tr.TraceID, s.SpanID)
			}
		}
	}
	failed, ok := attempts[0], attempts[1]
	if et := failed.tag(string(tracing.ErrorType)); !strings.HasPrefix(et, "transient") || failed.tag("otel.status_code") != "ERROR" {
		t.Errorf("attempt 1: error.type %q, status %q; want transient.*, ERROR", et, failed.tag("otel.status_code"))
	}
	if _, has := failed.event("retry"); !has {
		t.Errorf("attempt 1: no retry event (events %v)", failed.eventNames())
	}
	if et := ok.tag(string(tracing.ErrorType)); et != "" || ok.tag("otel.status_code") == "ERROR" {
		t.Errorf("attempt 2: error.type %q, status %q; want neither", et, ok.tag("otel.status_code"))
	}
	if failed.tag(string(tracing.WorkerID)) == ok.tag(string(tracing.WorkerID)) {
		t.Errorf("both attempts ran on %s", ok.tag(string(tracing.WorkerID)))
	}
	// The time the call spent queued before its first delivery, from A.
	queued := one(t, tr, spanQueued)
	if tr.Processes[queued.ProcessID].ServiceName != workerService || kv(tr.Processes[queued.ProcessID].Tags, "service.instance.id") != a.process {
		t.Errorf("%q: not reported by %s", spanQueued, a.process)
	}
}

// one returns the trace's only span named name, failing the test when
// there is not exactly one.
func one(t *testing.T, tr *jTrace, name string) *jSpan {
	t.Helper()
	spans := tr.named(name)
	if len(spans) != 1 {
		t.Fatalf("%d spans %q in the trace, want 1", len(spans), name)
	}
	return spans[0]
}
