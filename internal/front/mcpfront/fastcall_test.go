package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// byName answers each tool its own way: ok (with progress when asked),
// fail (an is_error result), gone (the pool does not know the tool) and
// slow (runs until cancelled).
type byName struct{ started chan string }

func (d *byName) Dispatch(ctx context.Context, _ string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	c := calls[0]
	switch c.Name {
	case "fail":
		return []envelope.Result{{CallID: c.ID, Tool: c.Name, IsError: true, Class: envelope.ClassPermanent, Code: "http_404",
			Attempts: 2, Content: envelope.Text("it failed <&>")}}, nil
	case "gone":
		return []envelope.Result{{CallID: c.ID, Tool: c.Name, IsError: true, Code: classify.CodeUnknownTool, Content: envelope.Text("no tool gone")}}, nil
	case "slow":
		d.started <- c.Name
		<-ctx.Done()
		return nil, ctx.Err()
	case "cached":
		// The gate's report: a hit, or a bypass when the call asks for a
		// fresh run.
		o, text := policy.CacheHit, "from the cache"
		if policy.NoCacheFrom(ctx) {
			o, text = policy.CacheBypass, "fresh"
		}
		if rep := policy.ReportFrom(ctx); rep != nil {
			rep.Cache = []policy.CacheOutcome{o}
		}
		return []envelope.Result{{CallID: c.ID, Tool: c.Name, Content: envelope.Text(text)}}, nil
	}
	if f := dispatch.ProgressFrom(ctx); f != nil {
		f(c.ID, tools.Progress{Progress: 1, Total: 2, Message: "half"})
		f(c.ID, tools.Progress{Progress: 2, Total: 2})
	}
	return []envelope.Result{{CallID: c.ID, Tool: c.Name, Content: envelope.Text("ran " + string(c.Input))}}, nil
}

// rawSession is a host's session on /mcp, its requests written by hand.
type rawSession struct {
	t      *testing.T
	url    string
	id     string
	active atomic.Int64 // requests the server is serving
}

// answer is what a POST got back.
type answer struct {
	status      int
	contentType string
	body        string
	session     string // the Mcp-Session-Id of the answer
}

func (a answer) String() string { return fmt.Sprintf("%d %s %q", a.status, a.contentType, a.body) }

func (rs *rawSession) post(body string) answer {
	rs.t.Helper()
	a, err := rs.postCtx(context.Background(), body)
	if err != nil {
		rs.t.Fatal(err)
	}
	return a
}

func (rs *rawSession) postCtx(ctx context.Context, body string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rs.url, strings.NewReader(body))
	if err != nil {
		rs.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if rs.id != "" {
		req.Header.Set("Mcp-Session-Id", rs.id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	if rs.id == "" {
		rs.id = resp.Header.Get("Mcp-Session-Id")
	}
	return answer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: string(b)}, nil
}

// openRaw serves a Server on d over HTTP and opens a session on it.
func openRaw(t *testing.T, d Dispatcher, timeout time.Duration) (*Server, *rawSession) {
	t.Helper()
	s, err := New(Config{Dispatcher: d, Tools: staticTools, SessionTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	rs := &rawSession{t: t}
	h := s.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.active.Add(1)
		defer rs.active.Add(-1)
		h.ServeHTTP(w, r)
	}))
	rs.url = hs.URL
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, rs.url, nil)
		req.Header.Set("Mcp-Session-Id", rs.id)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		hs.Close()
		_ = s.Stop(context.Background())
	})
	if a := rs.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`); a.status != http.StatusOK || rs.id == "" {
		t.Fatalf("initialize: %v", a)
	}
	if a := rs.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); a.status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %v", a)
	}
	return s, rs
}

// TestFastCallAnswersAsTheSDK: a tools/call of the common shape, served
// without the go-sdk, gets the bytes the go-sdk writes for the same call
// (sent with a params key the go-sdk ignores, which leaves it to the
// go-sdk): results, is_error results with their _meta, protocol errors,
// progress on the call's stream, string ids, HTML characters.
func TestFastCallAnswersAsTheSDK(t *testing.T) {
	s, rs := openRaw(t, &byName{}, 0)
	cases := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ok","arguments":{"a":"<b>"}%s}}`,
		`{"jsonrpc":"2.0","id":"x-2","method":"tools/call","params":{"_meta":{"progressToken":"tok","other":1},"name":"ok","arguments":{}%s}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"progressToken":7},"name":"ok"%s}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fail","arguments":null%s}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"gone","arguments":{}%s}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"ok","arguments":[1]%s}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ok","arguments":"text"%s}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"cached","arguments":{}%s}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"_meta":{"io.toolpool/cache":"no-cache"},"name":"cached","arguments":{}%s}}`,
	}
	for i, c := range cases {
		fast := rs.post(fmt.Sprintf(c, ""))
		if got := s.fast.Load(); got != int64(i+1) {
			t.Fatalf("case %d: %d calls on the fast path, want %d", i, got, i+1)
		}
		sdk := rs.post(fmt.Sprintf(c, `,"x":1`))
		if s.fast.Load() != int64(i+1) {
			t.Fatalf("case %d: the go-sdk's call went on the fast path", i)
		}
		if fast != sdk {
			t.Errorf("case %d:\nfast   %v\ngo-sdk %v", i, fast, sdk)
		}
		if !strings.HasPrefix(fast.body, "event: message\ndata: ") {
			t.Errorf("case %d: %v, want an SSE answer", i, fast)
		}
	}
	// The cache's outcome is in the result's _meta, not its content.
	if a := rs.post(fmt.Sprintf(cases[7], "")); !strings.Contains(a.body, `"_meta":{"io.toolpool/cache":"hit"}`) || !strings.Contains(a.body, `"text":"from the cache"`) {
		t.Errorf("a hit: %v", a)
	}
	if a := rs.post(fmt.Sprintf(cases[8], "")); !strings.Contains(a.body, `"_meta":{"io.toolpool/cache":"bypass"}`) || !strings.Contains(a.body, `"text":"fresh"`) {
		t.Errorf("no-cache: %v", a)
	}
}

// TestFastCallCancelled: notifications/cancelled cancels a call on the
// fast path as the go-sdk cancels its own, and the answer is the same; a
// request id in flight is refused the same way.
func TestFastCallCancelled(t *testing.T) {
	d := &byName{started: make(chan string, 2)}
	s, rs := openRaw(t, d, 0)
	run := func(id int, extra string) (first <-chan answer, dup answer) {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow","arguments":{}%s}}`, id, extra)
		ch := make(chan answer, 1)
		go func() { ch <- rs.post(body) }()
		<-d.started
		dup = rs.post(body)
		if a := rs.post(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"user"}}`, id)); a.status != http.StatusAccepted {
			t.Errorf("notifications/cancelled: %v", a)
		}
		return ch, dup
	}
	fastCh, fastDup := run(41, "")
	fast := <-fastCh
	if s.fast.Load() != 1 {
		t.Fatalf("%d calls on the fast path, want 1", s.fast.Load())
	}
	sdkCh, sdkDup := run(42, `,"x":1`)
	sdk := <-sdkCh
	same := func(what string, f, g answer) {
		g.body = strings.ReplaceAll(g.body, "42", "41")
		if f != g {
			t.Errorf("%s:\nfast   %v\ngo-sdk %v", what, f, g)
		}
	}
	same("the cancelled call", fast, sdk)
	same("the id in flight", fastDup, sdkDup)
	if !strings.Contains(fast.body, `"error":{"code":0,"message":"context canceled"}`) || fastDup.status != http.StatusBadRequest {
		t.Errorf("cancelled: %v; in flight: %v", fast, fastDup)
	}
}

// TestFastCallOutlivesItsRequest: a client that goes away before its
// call's answer loses the answer, not the call, as with the go-sdk: the
// request's handler ends at once, the call runs on until it is cancelled.
func TestFastCallOutlivesItsRequest(t *testing.T) {
	d := &byName{started: make(chan string, 1)}
	s, rs := openRaw(t, d, 0)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := rs.postCtx(ctx, `{"jsonrpc":"2.0","id":"gone","method":"tools/call","params":{"name":"slow","arguments":{}}}`)
		errc <- err
	}()
	<-d.started
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled request got an answer")
	}
	for deadline := time.Now().Add(30 * time.Second); rs.active.Load() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the handler of the request the client left did not end")
		}
	}
	raw, _, _ := strings.Cut(rs.id, ".") // the go-sdk's id, under the signature
	hs := s.sessions.owned(&http.Request{Header: http.Header{"Mcp-Session-Id": {raw}}})
	hs.mu.Lock()
	running := len(hs.calls)
	hs.mu.Unlock()
	if running != 1 || s.fast.Load() != 1 {
		t.Fatalf("%d calls running on the fast path (%d served), want the one the client left", running, s.fast.Load())
	}
	if a := rs.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"gone"}}`); a.status != http.StatusAccepted {
		t.Errorf("notifications/cancelled: %v", a)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		hs.mu.Lock()
		running = len(hs.calls)
		hs.mu.Unlock()
		if running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call was not cancelled")
		}
	}
}

// TestFastCallKeepsTheSessionAlive: calls on the fast path count as the
// session's activity; once it is idle for SessionTimeout its process state
// is closed, and its client is served statelessly from then on.
func TestFastCallKeepsTheSessionAlive(t *testing.T) {
	const timeout = 400 * time.Millisecond
	s, rs := openRaw(t, &byName{}, timeout)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ok","arguments":{}}}`
	for end := time.Now().Add(3 * timeout); time.Now().Before(end); time.Sleep(timeout / 4) {
		if a := rs.post(call); a.status != http.StatusOK || !strings.Contains(a.body, `"result"`) {
			t.Fatalf("a call while the session is in use: %v", a)
		}
	}
	if s.fast.Load() == 0 {
		t.Fatal("no call on the fast path")
	}
	for deadline := time.Now().Add(30 * time.Second); s.sessions.len() != 0; time.Sleep(timeout / 4) {
		if time.Now().After(deadline) {
			t.Fatalf("the idle session was not closed: %d sessions in the table", s.sessions.len())
		}
	}
	// Its client goes on with the same (signed) id: served without
	// process state, not on the fast path.
	fast := s.fast.Load()
	if a := rs.post(call); a.status != http.StatusOK || !strings.Contains(a.body, `"result"`) {
		t.Fatalf("a call after the session's state was closed: %v", a)
	}
	if s.fast.Load() != fast || s.sessions.len() != 0 {
		t.Errorf("the call after the close went on the fast path (%d -> %d) or opened a session (%d)", fast, s.fast.Load(), s.sessions.len())
	}
}

// TestReadFastParams: the params the fast path takes, and those it leaves
// to the go-sdk.
func TestReadFastParams(t *testing.T) {
	for params, want := range map[string]bool{
		`{"name":"a","arguments":{"x":1}}`:                       true,
		`{"name":"a"}`:                                           true,
		`{"name":"a","_meta":null}`:                              true,
		`{"name":"a","_meta":{"progressToken":1,"x/y":2}}`:       true,
		`{"Name":"a"}`:                                           false,
		`{"name":1}`:                                             false,
		`{"name":"a","task":{}}`:                                 false,
		`{"name":"a","_meta":[]}`:                                false,
		`{"name":"a","_meta":{"io.modelcontextprotocol/x":"1"}}`: false,
		`[]`: false,
		``:   false,
	} {
		if _, ok := readFastParams(json.RawMessage(params)); ok != want {
			t.Errorf("readFastParams(%s) = %v, want %v", params, ok, want)
		}
	}
}

// TestFastCall26AnswersAsTheSDK: a 2026-07-28 tools/call with the
// spec's headers and _meta, served without the go-sdk, gets the status,
// headers and bytes the go-sdk's stateless handler writes for the same
// call (sent with a params key the go-sdk ignores): results with
// resultType and serverInfo, is_error results with their _meta, protocol
// errors (400, plain JSON), progress, string ids. Requests the fast path
// leaves to the go-sdk (a header that does not match, _meta without
// clientCapabilities) are answered by it with the spec's errors.
func TestFastCall26AnswersAsTheSDK(t *testing.T) {
	s, url := serve(t, Config{Dispatcher: &byName{}, Tools: staticTools})
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}%s}`
	cases := []struct{ name, body string }{
		{"ok", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ok","arguments":{"a":"<b>"},` + fmt.Sprintf(meta, "") + `%s}}`},
		{"ok", `{"jsonrpc":"2.0","id":"x-2","method":"tools/call","params":{` + fmt.Sprintf(meta, `,"progressToken":"tok"`) + `,"name":"ok","arguments":{}%s}}`},
		{"fail", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fail","arguments":null,` + fmt.Sprintf(meta, "") + `%s}}`},
		{"gone", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"gone","arguments":{},` + fmt.Sprintf(meta, "") + `%s}}`},
		{"ok", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"ok","arguments":[1],` + fmt.Sprintf(meta, "") + `%s}}`},
		{"cached", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"cached","arguments":{},` + fmt.Sprintf(meta, "") + `%s}}`},
		{"cached", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"cached","arguments":{},` + fmt.Sprintf(meta, `,"io.toolpool/cache":"no-cache"`) + `%s}}`},
	}
	hdr := func(name string) []string {
		return []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", name}
	}
	for i, c := range cases {
		fast := send(t, http.DefaultClient, url, fmt.Sprintf(c.body, ""), hdr(c.name)...)
		if got := s.fast.Load(); got != int64(i+1) {
			t.Fatalf("case %d: %d calls on the fast path, want %d (%v)", i, got, i+1, fast)
		}
		sdk := send(t, http.DefaultClient, url, fmt.Sprintf(c.body, `,"x":1`), hdr(c.name)...)
		if s.fast.Load() != int64(i+1) {
			t.Fatalf("case %d: the go-sdk's call went on the fast path", i)
		}
		if fast != sdk {
			t.Errorf("case %d:\nfast   %v\ngo-sdk %v", i, fast, sdk)
		}
		if c.name == "ok" && i < 2 && !strings.Contains(fast.body, `"resultType":"complete"`) {
			t.Errorf("case %d: no resultType: %v", i, fast)
		}
		if want := map[int]string{5: `"io.toolpool/cache":"hit"`, 6: `"io.toolpool/cache":"bypass"`}[i]; want != "" && !strings.Contains(fast.body, want) {
			t.Errorf("case %d: %v, want %s", i, fast, want)
		}
	}
	n := s.fast.Load()
	for what, c := range map[string]struct {
		body string
		hdr  []string
		code string
	}{
		"Mcp-Name of another tool": {fmt.Sprintf(cases[0].body, ""), hdr("fail"), "-32020"},
		"no Mcp-Method":            {fmt.Sprintf(cases[0].body, ""), []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Name", "ok"}, "-32020"},
		"no clientCapabilities": {`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ok","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			hdr("ok"), "-32602"},
		"a _meta revision other than the header's": {strings.Replace(fmt.Sprintf(cases[0].body, ""), `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`, `"io.modelcontextprotocol/protocolVersion":"2026-08-01"`, 1),
			hdr("ok"), "-32020"},
	} {
		a := send(t, http.DefaultClient, url, c.body, c.hdr...)
		if a.status != http.StatusBadRequest || !strings.Contains(a.body, c.code) {
			t.Errorf("%s: %v, want 400 with %s", what, a, c.code)
		}
	}
	if s.fast.Load() != n {
		t.Errorf("a request the go-sdk refuses went on the fast path")
	}
}
