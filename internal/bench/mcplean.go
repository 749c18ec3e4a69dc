package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// leanProtocolVersion is the protocol revision the lean generator asks
// for in initialize: the newest one a stateful streamable-HTTP server
// negotiates (what the go-sdk client falls back to).
const leanProtocolVersion = "2025-11-25"

// leanMCPTarget runs turns as the JSON-RPC requests an MCP host sends on
// /mcp, written and read by hand over keep-alive HTTP, without an MCP
// client library: per agent a session (initialize, then
// notifications/initialized), then one POST of tools/call per call with
// the Mcp-Session-Id and MCP-Protocol-Version headers, its answer read as
// JSON or as an SSE stream. What it costs the process is little beside
// the server's side, which is what the phase measures.
type leanMCPTarget struct {
	url    string
	hc     *http.Client
	inputs callInputs

	mu       sync.Mutex
	sessions map[int]*leanSession
}

// leanSession is one agent's MCP session.
type leanSession struct {
	id      string // Mcp-Session-Id
	version string // the negotiated protocol version
	next    atomic.Int64
}

func newLeanMCPTarget(f *frontServer, inputs callInputs) *leanMCPTarget {
	return &leanMCPTarget{url: f.base + "/mcp", hc: f.hc, inputs: inputs, sessions: map[int]*leanSession{}}
}

// leanBuffers are the request and answer buffers of one call, reused.
var leanBuffers = sync.Pool{New: func() any { return new(leanBuf) }}

type leanBuf struct{ req, resp bytes.Buffer }

func (m *leanMCPTarget) turn(ctx context.Context, a *agent, seq uint64, k int) {
	s, err := m.session(ctx, a.id)
	if err != nil {
		a.calls += uint64(k)
		a.fail(failClass(ctx), k)
		return
	}
	blocks := m.inputs.blocks(a, seq, k)
	if k == 1 {
		m.record(ctx, a, m.call(ctx, s, &blocks[0]))
		return
	}
	outcomes := make([]leanOutcome, k)
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() { outcomes[i] = m.call(ctx, s, &blocks[i]) })
	}
	wg.Wait()
	for _, o := range outcomes {
		m.record(ctx, a, o)
	}
}

// leanOutcome is how one tools/call ended.
type leanOutcome struct {
	isError bool
	err     error
}

// errJSONRPC is a JSON-RPC error answer to a tools/call.
var errJSONRPC = errors.New("bench: mcp: a JSON-RPC error")

func (m *leanMCPTarget) record(ctx context.Context, a *agent, o leanOutcome) {
	a.calls++
	switch {
	case errors.Is(o.err, errJSONRPC):
		a.fail("jsonrpc_error", 1)
	case o.err != nil:
		a.fail(failClass(ctx), 1)
	case o.isError:
		a.fail("is_error", 1)
	}
}

// call sends one tools/call and reads its answer.
func (m *leanMCPTarget) call(ctx context.Context, s *leanSession, b *envelope.ToolUseBlock) leanOutcome {
	buf := leanBuffers.Get().(*leanBuf)
	defer leanBuffers.Put(buf)
	id := s.next.Add(1)
	buf.req.Reset()
	buf.req.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.req.WriteString(strconv.FormatInt(id, 10))
	buf.req.WriteString(`,"method":"tools/call","params":{"name":`)
	buf.req.WriteString(strconv.Quote(b.Name))
	buf.req.WriteString(`,"arguments":`)
	buf.req.Write(b.Input)
	buf.req.WriteString(`}}`)
	ans, _, err := m.post(ctx, s, buf, id)
	if err != nil {
		return leanOutcome{err: err}
	}
	if ans.Error != nil {
		return leanOutcome{err: fmt.Errorf("%w %d: %s", errJSONRPC, ans.Error.Code, ans.Error.Message)}
	}
	if ans.Result == nil {
		return leanOutcome{err: errors.New("bench: mcp: an answer without a result")}
	}
	return leanOutcome{isError: ans.Result.IsError}
}

// leanAnswer is what the generator reads of a JSON-RPC response.
type leanAnswer struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result *struct {
		IsError         bool   `json:"isError"`
		ProtocolVersion string `json:"protocolVersion"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// post sends buf.req on s (no session yet: s nil) and returns the
// response to request id and the answer's header, read from the JSON body or the SSE stream of
// the answer; the body is read to its end, so the connection is reused.
func (m *leanMCPTarget) post(ctx context.Context, s *leanSession, buf *leanBuf, id int64) (*leanAnswer, http.Header, error) {
	resp, err := m.send(ctx, s, buf.req.Bytes())
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	buf.resp.Reset()
	if _, err := buf.resp.ReadFrom(resp.Body); err != nil {
		return nil, nil, fmt.Errorf("bench: mcp: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("bench: mcp: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(buf.resp.Bytes()))
	}
	want := strconv.AppendInt(nil, id, 10)
	var ans leanAnswer
	found := func(data []byte) (bool, error) {
		ans = leanAnswer{}
		if err := json.Unmarshal(data, &ans); err != nil {
			return false, fmt.Errorf("bench: mcp: an answer that is not JSON-RPC: %w", err)
		}
		return ans.Method == "" && bytes.Equal(ans.ID, want), nil
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct == "application/json" {
		if ok, err := found(buf.resp.Bytes()); err != nil || !ok {
			return nil, nil, cmpErr(err, "bench: mcp: the JSON answer is not the response to the call")
		}
		return &ans, resp.Header, nil
	}
	ok, err := eachSSEData(buf.resp.Bytes(), found)
	if err != nil || !ok {
		return nil, nil, cmpErr(err, "bench: mcp: the SSE stream ended without the response to the call")
	}
	return &ans, resp.Header, nil
}

func cmpErr(err error, text string) error {
	if err != nil {
		return err
	}
	return errors.New(text)
}

// send POSTs body to /mcp with a host's headers.
func (m *leanMCPTarget) send(ctx context.Context, s *leanSession, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h["Content-Type"] = contentTypeJSON
	h["Accept"] = acceptMCP
	if s != nil {
		h["Mcp-Session-Id"] = []string{s.id}
		h["Mcp-Protocol-Version"] = []string{s.version}
	}
	return m.hc.Do(req)
}

var (
	contentTypeJSON = []string{"application/json"}
	acceptMCP       = []string{"application/json, text/event-stream"}
)

// eachSSEData calls f with the data of each event of an SSE stream (its
// data lines joined by newlines) until f reports true.
func eachSSEData(stream []byte, f func([]byte) (bool, error)) (bool, error) {
	var data []byte
	for len(stream) > 0 {
		line := stream
		if i := bytes.IndexByte(stream, '\n'); i >= 0 {
			line, stream = stream[:i], stream[i+1:]
		} else {
			stream = nil
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				if ok, err := f(data); ok || err != nil {
					return ok, err
				}
			}
			data = data[:0]
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(line[len("data:"):], []byte{' '})
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, v...)
		}
	}
	if len(data) > 0 {
		return f(data)
	}
	return false, nil
}

// session is agent id's session, opened on its first turn (a warm-up
// turn, when there is a warm-up).
func (m *leanMCPTarget) session(ctx context.Context, id int) (*leanSession, error) {
	m.mu.Lock()
	s := m.sessions[id]
	m.mu.Unlock()
	if s != nil {
		return s, nil
	}
	s, err := m.open(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: mcp session: %w", err)
	}
	m.mu.Lock()
	m.sessions[id] = s
	m.mu.Unlock()
	return s, nil
}

// open initializes a session as a host does: initialize, then
// notifications/initialized.
func (m *leanMCPTarget) open(ctx context.Context) (*leanSession, error) {
	buf := leanBuffers.Get().(*leanBuf)
	defer leanBuffers.Put(buf)
	buf.req.Reset()
	buf.req.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + leanProtocolVersion +
		`","capabilities":{},"clientInfo":{"name":"toolpool-bench-lean","version":"1"}}}`)
	ans, header, err := m.post(ctx, nil, buf, 0)
	switch {
	case err != nil:
		return nil, fmt.Errorf("initialize: %w", err)
	case ans.Error != nil || ans.Result == nil || ans.Result.ProtocolVersion == "" || header.Get("Mcp-Session-Id") == "":
		return nil, fmt.Errorf("initialize: %s", bytes.TrimSpace(buf.resp.Bytes()))
	}
	s := &leanSession{id: header.Get("Mcp-Session-Id"), version: ans.Result.ProtocolVersion}
	buf.req.Reset()
	buf.req.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp, err := m.send(ctx, s, buf.req.Bytes())
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return nil, fmt.Errorf("notifications/initialized: HTTP %d", resp.StatusCode)
	}
	return s, nil
}

// stop ends the sessions (DELETE), as a host does when it closes.
func (m *leanMCPTarget) stop() {
	m.mu.Lock()
	sessions := m.sessions
	m.sessions = map[int]*leanSession{}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), frontStopTimeout)
	defer cancel()
	for _, s := range sessions {
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, m.url, nil)
		if err != nil {
			continue
		}
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", s.version)
		if resp, err := m.hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
}
