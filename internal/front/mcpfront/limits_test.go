package mcpfront

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// counting answers every call and counts them.
type counting struct{ n atomic.Int64 }

func (d *counting) Dispatch(_ context.Context, _ string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	d.n.Add(int64(len(calls)))
	out := make([]envelope.Result, len(calls))
	for i, c := range calls {
		out[i] = envelope.Result{CallID: c.ID, Content: envelope.Text("ran")}
	}
	return out, nil
}

// serve serves a Server of cfg over HTTP; it returns it and its URL.
func serve(t testing.TB, cfg Config) (*Server, string) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.EndStreams()
		_ = s.Stop(context.Background())
		hs.Close()
	})
	return s, hs.URL
}

// send posts body to url with the headers hdr (key, value, ...).
func send(t testing.TB, c *http.Client, url, body string, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: string(b), session: resp.Header.Get("Mcp-Session-Id")}
}

const initialize2503 = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// batch is a JSON-RPC batch of n tools/call.
func batch(n int) string {
	calls := make([]string, n)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow","arguments":{}}}`, i+1)
	}
	return "[" + strings.Join(calls, ",") + "]"
}

// TestBatchOverTheLimit: a batch (revision 2025-03-26) of more messages
// than MaxCalls (the HTTP API's calls per request) is refused whole with
// one invalid-request error, and none of its calls runs; one at the limit
// runs. Over stdio the same.
func TestBatchOverTheLimit(t *testing.T) {
	d := &counting{}
	_, url := serve(t, Config{Dispatcher: d, Tools: staticTools, MaxCalls: 4})
	c := http.DefaultClient
	a := send(t, c, url, initialize2503)
	if a.status != http.StatusOK || a.session == "" {
		t.Fatalf("initialize: %v", a)
	}
	sid := a.session
	if a := send(t, c, url, batch(5), "Mcp-Session-Id", sid); a.status != http.StatusBadRequest ||
		!strings.Contains(a.body, `"code":-32600`) || !strings.Contains(a.body, "5 messages, over the limit of 4") || strings.Count(a.body, `"error"`) != 1 {
		t.Errorf("a batch of 5 over a limit of 4: %v", a)
	}
	if n := d.n.Load(); n != 0 {
		t.Fatalf("%d calls of the refused batch ran", n)
	}
	if a := send(t, c, url, batch(4), "Mcp-Session-Id", sid); a.status != http.StatusOK || strings.Count(a.body, `"result"`) != 4 {
		t.Errorf("a batch of 4: %v", a)
	}
	if n := d.n.Load(); n != 4 {
		t.Errorf("%d calls ran, want the batch's 4", n)
	}

	sd := &counting{}
	in, out, _ := newStdio(t, sd)
	if _, err := io.WriteString(in, initialize2503+"\n"+`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := out.ReadString('\n'); err != nil || !strings.Contains(line, `"protocolVersion":"2025-03-26"`) {
		t.Fatalf("stdio initialize: %q, %v", line, err)
	}
	if _, err := io.WriteString(in, batch(MaxCallsDefault+1)+"\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := out.ReadString('\n'); err != nil || !strings.Contains(line, "over the limit of 512") {
		t.Fatalf("stdio batch over the limit: %q, %v", line, err)
	}
	if n := sd.n.Load(); n != 0 {
		t.Errorf("%d calls of the refused stdio batch ran", n)
	}
}

// TestSessionCap: past MaxSessions, a new session is not held by the
// process (no goroutines, no table entry) but works: its signed id is
// served statelessly.
func TestSessionCap(t *testing.T) {
	const max = 3
	s, url := serve(t, Config{Dispatcher: &counting{}, Tools: staticTools, MaxSessions: max})
	c := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(c.CloseIdleConnections)
	open := func() string {
		a := send(t, c, url, initialize2503)
		if a.status != http.StatusOK || !strings.Contains(a.session, ".") {
			t.Fatalf("initialize: %v", a)
		}
		return a.session
	}
	var ids []string
	for range max {
		ids = append(ids, open())
	}
	if n := s.sessions.len(); n != max {
		t.Fatalf("%d sessions held, want %d", n, max)
	}
	base := runtime.NumGoroutine()
	for range 50 {
		ids = append(ids, open())
	}
	if n := s.sessions.len(); n != max {
		t.Errorf("%d sessions held after 50 more, want the cap %d", n, max)
	}
	for deadline := time.Now().Add(30 * time.Second); runtime.NumGoroutine() > base+10; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines %d after 50 sessions over the cap, %d before", runtime.NumGoroutine(), base)
		}
	}
	for i, id := range ids {
		a := send(t, c, url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{}}}`, "Mcp-Session-Id", id, "Mcp-Protocol-Version", "2025-03-26")
		if a.status != http.StatusOK || !strings.Contains(a.body, `"text":"ran"`) {
			t.Fatalf("session %d (held: %v): %v", i, i < max, a)
		}
	}
}

// TestSessionCost measures what a held session costs: it opens n
// sessions and reports the memory (heap and stacks) and goroutines they
// add (docs/mcp.md gives the figures). It checks the goroutines: 2 per
// session (the go-sdk's reader, the session table's watcher).
func TestSessionCost(t *testing.T) {
	const n = 1000
	s, url := serve(t, Config{Dispatcher: &counting{}, Tools: staticTools, MaxSessions: 2 * n})
	c := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(c.CloseIdleConnections)
	send(t, c, url, initialize2503) // warm up: pools, the connection
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.StackInuse
	}
	h0, g0 := heap(), runtime.NumGoroutine()
	for range n {
		a := send(t, c, url, initialize2503)
		if a.status != http.StatusOK {
			t.Fatalf("initialize: %v", a)
		}
		send(t, c, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Mcp-Session-Id", a.session)
	}
	h1, g1 := heap(), runtime.NumGoroutine()
	perHeap := float64(int64(h1)-int64(h0)) / n
	perG := float64(g1-g0) / n
	t.Logf("%d sessions: %.0f bytes (heap and stacks) and %.2f goroutines per session", n, perHeap, perG)
	if s.sessions.len() != n+1 {
		t.Errorf("%d sessions held, want %d", s.sessions.len(), n+1)
	}
	if perG > 2.05 {
		t.Errorf("%.2f goroutines per session, want at most 2", perG)
	}
}
