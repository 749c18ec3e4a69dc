package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

const (
	acmeKey  = "acme-0123456789abcdef"
	otherKey = "other-0123456789abcdef"
)

// counter is a tool that counts its executions per call id and blocks
// until opened.
type counter struct {
	mu      sync.Mutex
	runs    map[string]int
	open    chan struct{}
	once    sync.Once
	started chan string
}

func (c *counter) release() { c.once.Do(func() { close(c.open) }) }

func (c *counter) runsOf(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[id]
}

// asyncFleet is two orchestrators (replicas "a" and "b", each with its
// HTTP handler) on one JetStream, and a worker serving the demo tools and
// "gate" (one call at a time).
type asyncFleet struct {
	gate *counter
	a, b *asyncReplica
}

type asyncReplica struct {
	nc   *nats.Conn
	orch *pooltest.Orchestrator
	srv  *httptest.Server
}

func startAsyncFleet(t *testing.T, dmod func(*dispatch.Config)) *asyncFleet {
	t.Helper()
	srv, _, _ := natstest.StartProvisioned(t)
	reg := tools.NewRegistry()
	if err := demo.Register(reg); err != nil {
		t.Fatal(err)
	}
	g := &counter{runs: map[string]int{}, open: make(chan struct{}), started: make(chan string, 64)}
	t.Cleanup(g.release)
	err := reg.Register(tools.Tool{
		Name: "gate", Description: "blocks until the test opens it", InputSchema: json.RawMessage(`{"type":"object"}`),
		Concurrency: 1, Timeout: time.Minute,
		Handler: func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
			ci, _ := tools.CallInfoFrom(ctx)
			g.mu.Lock()
			g.runs[ci.ID]++
			g.mu.Unlock()
			g.started <- ci.ID
			select {
			case <-g.open:
				return tools.Text("opened " + ci.ID), nil
			case <-ctx.Done():
				return tools.Output{}, ctx.Err()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	pooltest.StartServer(t, srv.ClientURL(), reg)
	keys, err := apikey.Parse(nil, []byte(`[{tenant: acme, key: `+acmeKey+`}, {tenant: other, key: `+otherKey+`}]`), "test")
	if err != nil {
		t.Fatal(err)
	}
	replica := func(name string) *asyncReplica {
		nc := natstest.Connect(t, srv.ClientURL())
		o := pooltest.StartOrchestrator(t, nc, discovery.RegistryCatalog(reg), func(c *pooltest.OrchestratorConfig) {
			c.Dispatch.Instance = name
			c.Dispatch.WindowMargin, c.Dispatch.StaleAfter = -1, -1
			if dmod != nil {
				dmod(&c.Dispatch)
			}
			c.Tasks.Lease = time.Second
			c.API.Keys = keys
		})
		hs := httptest.NewServer(o.Handler())
		t.Cleanup(hs.Close)
		return &asyncReplica{nc: nc, orch: o, srv: hs}
	}
	return &asyncFleet{gate: g, a: replica("a"), b: replica("b")}
}

func (f *asyncFleet) started(t *testing.T) string {
	t.Helper()
	select {
	case id := <-f.gate.started:
		return id
	case <-time.After(30 * time.Second):
		t.Fatal("no call reached the tool")
		return ""
	}
}

// do sends a request to r with the key and headers (name, value, ...).
func (r *asyncReplica) do(t *testing.T, method, path, key, body string, hdr ...string) answer {
	t.Helper()
	var rd *strings.Reader
	if body != "" {
		rd = strings.NewReader(body)
	} else {
		rd = strings.NewReader("")
	}
	req, err := http.NewRequest(method, r.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	return send(t, req)
}

func anthropicTurn(calls ...[2]string) string {
	var blocks []string
	for _, c := range calls {
		blocks = append(blocks, `{"type":"tool_use","id":"`+c[0]+`","name":"`+c[1]+`","input":{}}`)
	}
	return `{"role":"assistant","content":[` + strings.Join(blocks, ",") + `]}`
}

// accepted checks a 202 and returns the async call's Location.
func accepted(t *testing.T, a answer) string {
	t.Helper()
	if a.status != http.StatusAccepted {
		t.Fatalf("status %d, want 202: %s", a.status, a.body)
	}
	var ac httpapi.AsyncCall
	if err := json.Unmarshal(a.body, &ac); err != nil || ac.ID == "" || ac.Status != "working" {
		t.Fatalf("202 body %s (%v)", a.body, err)
	}
	loc := a.header.Get("Location")
	if loc != httpapi.PathToolCalls+"/"+ac.ID {
		t.Fatalf("Location %q for id %q", loc, ac.ID)
	}
	if ra, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After %q", a.header.Get("Retry-After"))
	}
	return loc
}

// poll GETs loc on r with ?wait= until it is not 202.
func poll(t *testing.T, r *asyncReplica, loc, key string) answer {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		a := r.do(t, http.MethodGet, loc+"?wait=5s", key, "")
		if a.status != http.StatusAccepted {
			return a
		}
	}
	t.Fatalf("%s still working", loc)
	return answer{}
}

// Posted to A with Prefer: respond-async, polled on B: 202 at once with
// Location and Preference-Applied, 202 while the call runs, then 200 with
// the answer in the request's format; only the same tenant sees it.
func TestAsyncPostOnAPollOnB(t *testing.T) {
	f := startAsyncFleet(t, nil)
	id := uid("async")
	post := f.a.do(t, http.MethodPost, httpapi.PathToolCalls, acmeKey, anthropicTurn([2]string{id, "gate"}), "Prefer", "respond-async")
	loc := accepted(t, post)
	if got := post.header.Get(httpapi.HeaderPreferenceApplied); got != "respond-async" {
		t.Fatalf("Preference-Applied %q", got)
	}
	f.started(t)
	if a := f.b.do(t, http.MethodGet, loc, acmeKey, ""); a.status != http.StatusAccepted {
		t.Fatalf("GET on B while running: %d %s", a.status, a.body)
	}
	for _, key := range []string{otherKey} {
		if a := f.b.do(t, http.MethodGet, loc, key, ""); a.status != http.StatusNotFound || !strings.Contains(string(a.body), `"not_found"`) {
			t.Fatalf("GET as another tenant: %d %s", a.status, a.body)
		}
		if a := f.b.do(t, http.MethodDelete, loc, key, ""); a.status != http.StatusNotFound {
			t.Fatalf("DELETE as another tenant: %d %s", a.status, a.body)
		}
	}
	if a := f.b.do(t, http.MethodGet, loc, "", ""); a.status != http.StatusUnauthorized {
		t.Fatalf("GET without a key: %d", a.status)
	}
	f.gate.release()
	done := poll(t, f.b, loc, acmeKey)
	if done.status != http.StatusOK || done.header.Get(httpapi.HeaderFormat) != "anthropic" {
		t.Fatalf("done: %d %v %s", done.status, done.header, done.body)
	}
	var msg struct {
		Role    string `json:"role"`
		Content []struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
			Content   []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"content"`
	}
	if err := json.Unmarshal(done.body, &msg); err != nil || msg.Role != "user" || len(msg.Content) != 1 ||
		msg.Content[0].ToolUseID != id || msg.Content[0].Content[0].Text != "opened "+id {
		t.Fatalf("answer %s (%v)", done.body, err)
	}
	if n := f.gate.runsOf(id); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
}

// A is stopped hard (its NATS connection closed, no drain) while one call
// of the async turn runs and the next is held in its memory: B adopts
// the task, the answer is retrievable from B, each call ran once.
func TestAsyncSurvivesHardKill(t *testing.T) {
	f := startAsyncFleet(t, nil)
	id0, id1 := uid("kill"), uid("kill")
	post := f.a.do(t, http.MethodPost, httpapi.PathToolCalls, acmeKey,
		anthropicTurn([2]string{id0, "gate"}, [2]string{id1, "gate"}), "Prefer", "respond-async")
	loc := accepted(t, post)
	if got := f.started(t); got != id0 {
		t.Fatalf("first execution %s", got)
	}
	natstest.Eventually(t, 10*time.Second, "A holds the second call", func() bool {
		for _, ts := range f.a.orch.Dispatcher().SchedSnapshot().Tools {
			if ts.Tool == "gate" {
				return ts.InFlight == 1 && ts.Waiting == 1
			}
		}
		return false
	})
	f.a.nc.Close()
	f.gate.release()
	done := poll(t, f.b, loc, acmeKey)
	if done.status != http.StatusOK {
		t.Fatalf("done: %d %s", done.status, done.body)
	}
	for _, id := range []string{id0, id1} {
		if !strings.Contains(string(done.body), "opened "+id) {
			t.Fatalf("answer %s lacks %s's result", done.body, id)
		}
		if n := f.gate.runsOf(id); n != 1 {
			t.Fatalf("%s ran %d times, want once", id, n)
		}
	}
}

// Bad inputs of the async routes: a bad wait is 400, an unknown id 404,
// a method not served 405; DELETE cancels and GET then answers 409.
func TestAsyncRoutes(t *testing.T) {
	f := startAsyncFleet(t, nil)
	for _, w := range []string{"soon", "-1s", "NaN", "1e400"} {
		a := f.a.do(t, http.MethodGet, httpapi.PathToolCalls+"/AAAAAAAAAAAAAAAAAAAAAA?wait="+w, acmeKey, "")
		if a.status != http.StatusBadRequest || !strings.Contains(string(a.body), "wait") {
			t.Fatalf("wait=%s: %d %s", w, a.status, a.body)
		}
	}
	for _, id := range []string{"AAAAAAAAAAAAAAAAAAAAAA", "x", "*", "a/b", strings.Repeat("z", 300)} {
		a := f.a.do(t, http.MethodGet, httpapi.PathToolCalls+"/"+id, acmeKey, "")
		if a.status != http.StatusNotFound || !strings.Contains(string(a.body), `"not_found"`) {
			t.Fatalf("GET %q: %d %s", id, a.status, a.body)
		}
	}
	if a := f.a.do(t, http.MethodPut, httpapi.PathToolCalls+"/x", acmeKey, "{}"); a.status != http.StatusMethodNotAllowed ||
		a.header.Get("Allow") != "GET, HEAD, DELETE" {
		t.Fatalf("PUT: %d %v", a.status, a.header)
	}
	id := uid("cancel")
	loc := accepted(t, f.a.do(t, http.MethodPost, httpapi.PathToolCalls, acmeKey, anthropicTurn([2]string{id, "gate"}), "Prefer", "respond-async"))
	f.started(t)
	del := f.b.do(t, http.MethodDelete, loc, acmeKey, "")
	var ac httpapi.AsyncCall
	if del.status != http.StatusOK || json.Unmarshal(del.body, &ac) != nil || ac.Status != "cancelled" {
		t.Fatalf("DELETE: %d %s", del.status, del.body)
	}
	if a := f.a.do(t, http.MethodGet, loc, acmeKey, ""); a.status != http.StatusConflict || !strings.Contains(string(a.body), `"cancelled"`) {
		t.Fatalf("GET after DELETE: %d %s", a.status, a.body)
	}
}

// Without Prefer: respond-async, or with nothing to dispatch, a POST is
// answered synchronously; with Prefer: respond-async, wait=N a call done
// in time is answered at once with 200.
func TestAsyncPreferenceVariants(t *testing.T) {
	f := startAsyncFleet(t, nil)
	echo := `{"role":"assistant","content":[{"type":"tool_use","id":"` + uid("e") + `","name":"echo","input":{"text":"hi"}}]}`
	if a := f.a.do(t, http.MethodPost, httpapi.PathToolCalls, acmeKey, echo); a.status != http.StatusOK || a.header.Get(httpapi.HeaderPreferenceApplied) != "" {
		t.Fatalf("sync: %d %v", a.status, a.header)
	}
	echo = `{"role":"assistant","content":[{"type":"tool_use","id":"` + uid("e") + `","name":"echo","input":{"text":"hi"}}]}`
	a := f.a.do(t, http.MethodPost, httpapi.PathToolCalls, acmeKey, echo, "Prefer", "wait=30, respond-async")
	if a.status != http.StatusOK || !strings.Contains(string(a.body), "hi") || a.header.Get(httpapi.HeaderPreferenceApplied) != "" {
		t.Fatalf("respond-async with wait: %d %v %s", a.status, a.header, a.body)
	}
	// Arguments that are not JSON are answered by the API itself: nothing
	// to run, the answer is ready.
	bad := `{"role":"assistant","tool_calls":[{"id":"` + uid("u") + `","type":"function","function":{"name":"echo","arguments":"{not json"}}]}`
	if a := f.a.do(t, http.MethodPost, httpapi.PathToolCalls, acmeKey, bad, "Prefer", "respond-async"); a.status != http.StatusOK {
		t.Fatalf("async with nothing to dispatch: %d %s", a.status, a.body)
	}
	// OpenAI's shape comes back in OpenAI's shape, the calls answered by
	// the API itself in their places.
	bid, oid := uid("b"), uid("o")
	openai := `{"role":"assistant","tool_calls":[` +
		`{"id":"` + bid + `","type":"function","function":{"name":"echo","arguments":"{not json"}},` +
		`{"id":"` + oid + `","type":"function","function":{"name":"echo","arguments":"{\"text\":\"yo\"}"}}]}`
	loc := accepted(t, f.a.do(t, http.MethodPost, httpapi.PathToolCalls, acmeKey, openai, "Prefer", "respond-async"))
	done := poll(t, f.b, loc, acmeKey)
	var msgs []httpapi.ToolMessage
	if done.status != http.StatusOK || done.header.Get(httpapi.HeaderFormat) != "openai" || done.header.Get(httpapi.HeaderErrorIndexes) != "0" ||
		json.Unmarshal(done.body, &msgs) != nil || len(msgs) != 2 || msgs[0].ToolCallID != bid || msgs[1].ToolCallID != oid ||
		!strings.HasPrefix(msgs[0].Content, httpapi.ErrorPrefix) || msgs[1].Content != "yo" {
		t.Fatalf("openai: %d %v %s", done.status, done.header, done.body)
	}
}

// Admission applies at POST: a saturated pool answers 429, as for a
// synchronous call, and records nothing.
func TestAsyncSaturated(t *testing.T) {
	f := startAsyncFleet(t, func(c *dispatch.Config) { c.MaxCallsInFlight = 1 })
	accepted(t, f.a.do(t, http.MethodPost, httpapi.PathToolCalls, acmeKey, anthropicTurn([2]string{uid("s"), "gate"}), "Prefer", "respond-async"))
	f.started(t)
	a := f.a.do(t, http.MethodPost, httpapi.PathToolCalls, acmeKey, anthropicTurn([2]string{uid("s"), "gate"}), "Prefer", "respond-async")
	if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" || a.header.Get("Location") != "" {
		t.Fatalf("saturated: %d %v %s", a.status, a.header, a.body)
	}
	f.gate.release()
}
