package mcpfront

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// scripted is a Dispatcher standing in for the pool where the pool's part
// cannot run here: it reports progress through the ProgressFunc Dispatch
// finds on its ctx (what the control helper's relay does), then answers.
type scripted struct {
	mu       sync.Mutex
	sessions []string
}

func (d *scripted) Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	d.mu.Lock()
	d.sessions = append(d.sessions, session)
	d.mu.Unlock()
	if f := dispatch.ProgressFrom(ctx); f != nil {
		f(calls[0].ID, tools.Progress{Progress: 1, Total: 2, Message: "half"})
		f(calls[0].ID, tools.Progress{Progress: 2, Total: 2, Message: "done"})
	}
	return []envelope.Result{{CallID: calls[0].ID, Tool: calls[0].Name, Content: envelope.Text("ran " + calls[0].Name)}}, nil
}

func staticTools(context.Context) []Tool {
	return []Tool{{Definition: tools.Definition{Name: "slow", Description: "A slow tool.", InputSchema: json.RawMessage(`{"type":"object"}`)}}}
}

// newStdio serves s on pipes; it returns the client's ends.
func newStdio(t *testing.T, d Dispatcher) (in io.WriteCloser, out *bufio.Reader, s *Server) {
	t.Helper()
	s, err := New(Config{Dispatcher: d, Tools: staticTools})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.ServeStdio(context.Background(), inR, outW); _ = outW.Close() }()
	t.Cleanup(func() {
		_ = inW.Close()
		go func() { _, _ = io.Copy(io.Discard, outR) }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeStdio: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("ServeStdio did not end with its input")
		}
		_ = s.Stop(context.Background())
	})
	return inW, bufio.NewReader(outR), s
}

// TestStdioProgress: a go-sdk client on the stdio transport calls a tool
// with a progressToken; the reports the pool hands the ProgressFunc reach
// it as notifications/progress; the pool session is one per connection.
func TestStdioProgress(t *testing.T) {
	d := &scripted{}
	inW, out, _ := newStdio(t, d)
	got := make(chan *mcp.ProgressNotificationParams, 8)
	c := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { got <- r.Params },
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(out), Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "ran slow" {
		t.Fatalf("call: %+v, %v", res, err)
	}
	for _, want := range []string{"half", "done"} {
		select {
		case p := <-got:
			if p.Message != want || p.ProgressToken != "tok-1" || p.Total != 2 {
				t.Errorf("progress %+v, want %q", p, want)
			}
		case <-ctx.Done():
			t.Fatalf("no progress %q", want)
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow"}); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.sessions) != 2 || d.sessions[0] != d.sessions[1] || !strings.HasPrefix(d.sessions[0], "mcp-") {
		t.Errorf("sessions %v", d.sessions)
	}
}

// TestStdioBadLines: lines that are not JSON-RPC are answered with their
// JSON-RPC errors and the session goes on.
func TestStdioBadLines(t *testing.T) {
	inW, out, _ := newStdio(t, &scripted{})
	write := func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	read := func() map[string]any {
		t.Helper()
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return m
	}
	code := func(m map[string]any) float64 {
		e, _ := m["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return c
	}
	write(`{"jsonrpc":"2.0",`)
	if m := read(); code(m) != -32700 || m["id"] != nil {
		t.Errorf("not JSON: %v", m)
	}
	write(`[1]`)
	if m := read(); code(m) != -32600 {
		t.Errorf("bad batch: %v", m)
	}
	write(`{"jsonrpc":"2.0","method":"notifications/unknown"}`)
	write(`{"jsonrpc":"2.0","id":7,"method":"no/such"}`)
	if m := read(); code(m) != -32601 || m["id"] != 7.0 {
		t.Errorf("unknown method: %v", m)
	}
	write(`{"jsonrpc":"2.0","id":8,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := read(); m["id"] != 8.0 || m["result"] == nil {
		t.Errorf("initialize after bad lines: %v", m)
	}
	write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	write(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow","arguments":"x"}}`)
	if m := read(); code(m) != -32602 || m["id"] != 9.0 {
		t.Errorf("arguments a string: %v", m)
	}
	write(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	if m := read(); m["id"] != 10.0 || m["result"] == nil {
		t.Errorf("a call after the bad ones: %v", m)
	}
}

// rawStdio serves a session on stdio for raw lines: write sends one line,
// readLine reads the next line of the server's, read reads it as a JSON
// object.
func rawStdio(t *testing.T) (write func(string), readLine func() string, read func() map[string]any) {
	inW, out, _ := newStdio(t, &scripted{})
	write = func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	readLine = func() string {
		t.Helper()
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("no answer (the session ended?): %v", err)
		}
		return line
	}
	read = func() map[string]any {
		t.Helper()
		line := readLine()
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return m
	}
	return write, readLine, read
}

// TestStdioMalformedLines: the lines the go-sdk's transport would end the
// session on (a batch in 2025-06-18 and later, a batch repeating an id, an
// "error" member it cannot read) are answered with an invalid-request
// error, the request's id when it has a good one, and the session goes
// on: a ping after each is answered.
func TestStdioMalformedLines(t *testing.T) {
	errorLines := func(id string) []string {
		return []string{
			`{"jsonrpc":"2.0","id":` + id + `,"error":"bad"}`,
			`{"jsonrpc":"2.0","id":` + id + `,"error":5}`,
			`{"jsonrpc":"2.0","id":` + id + `,"error":[]}`,
			`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":"x","message":"m"}}`,
			`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":1.5,"message":"m"}}`,
			`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":1,"message":5}}`,
			`{"jsonrpc":"2.0","id":` + id + `,"method":"ping","error":"x"}`,
		}
	}
	type bad struct {
		line string
		id   any // the id of the error; nil: null
	}
	for _, tc := range []struct {
		version string // "": not initialized
		bad     []bad
	}{
		{"", []bad{
			{errorLines("79")[0], 79.0},
			{errorLines(`"s"`)[5], "s"},
			{`{"jsonrpc":"2.0","method":"notifications/cancelled","error":"x"}`, nil},
		}},
		{"2025-11-25", []bad{
			{`[{"jsonrpc":"2.0","id":4,"method":"ping"}]`, nil},
			{`[{"jsonrpc":"2.0","method":"notifications/unknown"}]`, nil},
			{`[{"jsonrpc":"2.0","id":8,"method":"ping"},{"jsonrpc":"2.0","id":8,"method":"ping"}]`, nil},
			{`{"jsonrpc":"2.0","method":"notifications/cancelled","error":"x"}`, nil},
			{`{"jsonrpc":"2.0","id":81,"method":"ping","error":"x"}`, 81.0},
		}},
		{"2025-03-26", []bad{
			{`[{"jsonrpc":"2.0","id":8,"method":"ping"},{"jsonrpc":"2.0","id":8,"method":"ping"}]`, nil},
			{`[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","id":"a","method":"tools/list"}]`, nil},
			{`[{"jsonrpc":"2.0","id":9,"error":"bad"}]`, 9.0},
		}},
	} {
		t.Run("v"+tc.version, func(t *testing.T) {
			write, readLine, read := rawStdio(t)
			if tc.version != "" {
				write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + tc.version + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
				if m := read(); m["id"] != 1.0 || m["result"] == nil {
					t.Fatalf("initialize: %v", m)
				}
				write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			}
			lines := tc.bad
			for _, l := range errorLines("79") {
				lines = append(lines, bad{l, 79.0})
			}
			for i, b := range lines {
				write(b.line)
				m := read()
				e, _ := m["error"].(map[string]any)
				if e["code"] != -32600.0 || m["id"] != b.id {
					t.Errorf("%s: %v, want a -32600 error with the id %v", b.line, m, b.id)
				}
				ping := 100 + i
				write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, ping))
				if m := read(); m["id"] != float64(ping) || m["result"] == nil {
					t.Fatalf("ping after %s: %v", b.line, m)
				}
			}
			if tc.version == "2025-03-26" {
				// Batches are still served in 2025-03-26.
				write(`[{"jsonrpc":"2.0","id":"p","method":"ping"}]`)
				var ms []map[string]any
				if line := readLine(); json.Unmarshal([]byte(line), &ms) != nil || len(ms) != 1 || ms[0]["id"] != "p" || ms[0]["result"] == nil {
					t.Fatalf("a batch in 2025-03-26: %q", line)
				}
			}
			if tc.version == "" {
				return // not initialized: tools/list is refused
			}
			write(`{"jsonrpc":"2.0","id":200,"method":"tools/list"}`)
			if m := read(); m["id"] != 200.0 || m["result"] == nil {
				t.Fatalf("tools/list: %v", m)
			}
		})
	}
}

// blocking is a Dispatcher whose calls wait for their ctx to end, and
// report it: the pool's control makes that cancel the calls pool-wide.
type blocking struct {
	started chan struct{}
	ended   chan error
}

func (d *blocking) Dispatch(ctx context.Context, _ string, _ []envelope.ToolUseBlock) ([]envelope.Result, error) {
	d.started <- struct{}{}
	<-ctx.Done()
	d.ended <- context.Cause(ctx)
	return nil, ctx.Err()
}

// TestCancelledCall: a client that cancels a call (the go-sdk sends
// notifications/cancelled) cancels the ctx the call was dispatched with.
func TestCancelledCall(t *testing.T) {
	d := &blocking{started: make(chan struct{}, 1), ended: make(chan error, 1)}
	inW, out, _ := newStdio(t, d)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), &mcp.IOTransport{Reader: io.NopCloser(out), Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
		errc <- err
	}()
	<-d.started
	cancel()
	select {
	case err := <-d.ended:
		if err == nil {
			t.Error("the dispatch ctx ended without an error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the dispatch ctx was not cancelled")
	}
	if err := <-errc; err == nil {
		t.Error("the cancelled call returned no error")
	}
}

// TestStopCancelsCalls: Stop's drain ends with its ctx; the calls still
// running are then cancelled with ErrStopped, and a call after Stop is
// refused.
func TestStopCancelsCalls(t *testing.T) {
	d := &blocking{started: make(chan struct{}, 1), ended: make(chan error, 1)}
	inW, out, s := newStdio(t, d)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), &mcp.IOTransport{Reader: io.NopCloser(out), Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	errc := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
		if err == nil && !res.IsError {
			err = errors.New("not an isError result")
		}
		errc <- err
	}()
	<-d.started
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Stop = %v, want the drain's ctx error", err)
	}
	if err := <-d.ended; !errors.Is(err, ErrStopped) {
		t.Errorf("the call's ctx ended with %v, want ErrStopped", err)
	}
	if err := <-errc; err != nil {
		t.Errorf("the call cancelled by Stop: %v; want an isError result", err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "restarting") {
		t.Errorf("a call after Stop: %+v, %v; want an isError result saying the pool restarts", res, err)
	}
	<-s.Stopped()
}
