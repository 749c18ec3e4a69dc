package mcpfront

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// The fast path of tools/call on /mcp (see docs/decisions.md, "MCP
// tools/call without the go-sdk's decoder"): the go-sdk decodes each
// JSON-RPC message several times with a new decoder and its 32 KiB buffer
// each time, which made it the front door's largest cost. A tools/call of
// the common shape, on a session the go-sdk initialized, is therefore read,
// run and answered here, with the bytes the go-sdk would write; every other
// message, and every tools/call that is not of that shape, goes to the
// go-sdk as before. What the go-sdk did for such a call is done here too:
// the session's owner is checked, the session's idle timer is paused
// while the call runs (the timer is this package's: sessionTable), a
// request id already in flight is refused, notifications/cancelled
// cancels the call, progress goes on the call's SSE stream, and a session
// that closes ends its calls.

// legacyVersions are the protocol revisions a stateful go-sdk server
// serves requests of with no checks beyond the session's: a request with
// another MCP-Protocol-Version header (2026-07-28 and later, or one the
// go-sdk refuses) goes to the go-sdk.
var legacyVersions = map[string]bool{"2025-11-25": true, "2025-06-18": true, "2025-03-26": true, "2024-11-05": true}

// fastParams are the params of a tools/call of the common shape.
type fastParams struct {
	name     string
	args     json.RawMessage
	progress any  // the progressToken; nil: none
	noCache  bool // _meta asks for a fresh run (MetaCache)
	// traceparent is _meta's W3C trace context ("" for none).
	traceparent string
}

// readFastParams reads params as the go-sdk reads CallToolParamsRaw; ok
// is false for params the fast path leaves to the go-sdk: not an object,
// a key other than name, arguments and _meta (the go-sdk's keys are case
// sensitive), a name that is not a string, a _meta that is not an object
// or that holds a key of the protocol's own (io.modelcontextprotocol/...:
// the 2026-07-28 revision's per-request fields).
func readFastParams(params json.RawMessage) (p fastParams, ok bool) {
	var fields map[string]json.RawMessage
	if len(params) == 0 || params[0] != '{' || json.Unmarshal(params, &fields) != nil {
		return p, false
	}
	for k, v := range fields {
		switch k {
		case "name":
			if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &p.name) != nil {
				return p, false
			}
		case "arguments":
			p.args = v
		case "_meta":
			if string(v) == "null" {
				continue
			}
			var meta map[string]any
			if len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &meta) != nil {
				return p, false
			}
			for mk, mv := range meta {
				if strings.HasPrefix(mk, "io.modelcontextprotocol/") {
					return p, false
				}
				switch mk {
				case "progressToken":
					p.progress = mv
				case MetaCache:
					p.noCache = metaNoCache(mv)
				case metaTraceparent:
					p.traceparent, _ = mv.(string)
				}
			}
		default:
			return p, false
		}
	}
	return p, true
}

// fastCall reports whether the POST r, whose one message is m, on the
// session hs, is a tools/call the fast path serves; if so it has served
// it.
func (s *Server) fastCall(w http.ResponseWriter, r *http.Request, hs *httpSession, m goodMessage) bool {
	if m.batch || m.id == nil || m.method != "tools/call" || !plainPOST(r) || hs.ss.InitializeParams() == nil {
		return false
	}
	p, ok := readFastParams(m.params)
	if !ok {
		return false
	}
	id := wireID(m.id)
	// The call outlives the HTTP request, as with the go-sdk: it ends
	// when the client cancels it, its session closes, or Stop's drain
	// runs out; a client that goes away only loses the answer.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	if !hs.addCall(id, cancel) {
		cancel(nil)
		writeError(w, http.StatusBadRequest, m.id, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("duplicate in-flight request ID %v", m.id)})
		return true
	}
	s.fast.Add(1)
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	out := &sseStream{w: w}
	in := callIn{name: p.name, args: p.args, key: keyOfInfo(auth.TokenInfoFromContext(r.Context())), session: "mcp-" + hs.ss.ID(), noCache: p.noCache}
	if s.cfg.Tracer.On() {
		in.traceparent = cmp.Or(p.traceparent, r.Header.Get(envelope.HeaderTraceparent))
	}
	if p.progress != nil {
		in.progress, in.notify = p.progress, out.notify
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel(nil)
		defer hs.removeCall(id)
		res, err := s.run(ctx, in)
		if errors.Is(context.Cause(ctx), errSessionClosed) {
			return // as with the go-sdk: no answer on a closed session
		}
		out.respond(m.id, res, err)
	}()
	select {
	case <-done:
	case <-r.Context().Done():
		out.release()
	}
	return true
}

// plainPOST reports whether r's headers are those the go-sdk serves a
// request with once its session is found: JSON, an Accept of JSON and
// SSE, no Last-Event-ID, and a protocol revision before 2026-07-28 (or
// none). Others go to the go-sdk, which answers them as before.
func plainPOST(r *http.Request) bool {
	h := r.Header
	ct := h.Get("Content-Type")
	if ct != "application/json" && baseType(ct) != "application/json" {
		return false
	}
	if v := h.Get("Mcp-Protocol-Version"); v != "" && !legacyVersions[v] {
		return false
	}
	if len(h.Values("Last-Event-Id")) > 0 {
		return false
	}
	jsonOK, sseOK := accepts(h.Values("Accept"))
	return jsonOK && sseOK
}

// baseType is a Content-Type's media type, lowercase, without parameters.
func baseType(ct string) string {
	base, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(base))
}

// accepts reads Accept headers as the go-sdk does: whether they take JSON
// and SSE.
func accepts(values []string) (jsonOK, sseOK bool) {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			switch baseType(part) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				sseOK = true
			case "*/*":
				jsonOK, sseOK = true, true
			}
		}
	}
	return jsonOK, sseOK
}

// wireID is a request id as the go-sdk keys its requests in flight.
func wireID(id any) jsonrpc.ID {
	if n, ok := id.(int64); ok {
		id = float64(n) // read as a float64 in the first place
	}
	wid, _ := jsonrpc.MakeID(id)
	return wid
}

// keyOfInfo is the API key of a request's token info, if any.
func keyOfInfo(info *auth.TokenInfo) *apikey.Key {
	if info == nil {
		return nil
	}
	k, _ := info.Extra[tokenKeyExtra].(*apikey.Key)
	return k
}

// sseStream is the SSE answer of one call: its progress notifications,
// then its response, each an event "message" as the go-sdk writes them.
type sseStream struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	gone bool // the request ended: w is not to be touched
}

// release ends the writes to w: the request ended before the call did.
func (o *sseStream) release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gone = true
}

// event writes one event, and flushes it when flush is set.
func (o *sseStream) event(data []byte, flush bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.gone {
		return errors.New("mcpfront: the request ended")
	}
	b := make([]byte, 0, len("event: message\ndata: \n\n")+len(data))
	b = append(b, "event: message\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	_, err := o.w.Write(b)
	if flush {
		_ = http.NewResponseController(o.w).Flush()
	}
	return err
}

// notify writes a notifications/progress.
func (o *sseStream) notify(_ context.Context, p *mcp.ProgressNotificationParams) error {
	params, err := marshal(p)
	if err != nil {
		return err
	}
	b := make([]byte, 0, 64+len(params))
	b = append(b, `{"jsonrpc":"2.0","method":"notifications/progress","params":`...)
	b = append(b, params...)
	return o.event(append(b, '}'), true)
}

// respond writes the response to request id: res, or err as the go-sdk
// turns a handler's error into a JSON-RPC error.
func (o *sseStream) respond(id any, res mcp.Result, err error) {
	b := []byte(`{"jsonrpc":"2.0","id":`)
	switch id := id.(type) {
	case int64:
		b = strconv.AppendInt(b, id, 10)
	case string:
		q, _ := marshal(id)
		b = append(b, q...)
	}
	var body []byte
	if err == nil {
		b = append(b, `,"result":`...)
		body, err = marshal(res)
	}
	if err != nil {
		b = append(b, `,"error":`...)
		body, _ = marshal(wireError(err))
	}
	b = append(b, body...)
	// Not flushed: the handler returns next, and net/http sends what is
	// left; an answer that is the whole stream then goes in one write,
	// with its Content-Length.
	_ = o.event(append(b, '}'), false)
}

// wireError is err as the go-sdk writes a handler's error: a
// *jsonrpc.Error as it is, another error by its text with the code of
// the *jsonrpc.Error it wraps, if any.
func wireError(err error) *jsonrpc.Error {
	if je, ok := err.(*jsonrpc.Error); ok {
		return je
	}
	out := &jsonrpc.Error{Message: err.Error()}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		out.Code = je.Code
	}
	return out
}

// marshal is v as the go-sdk writes JSON: encoding/json without HTML
// escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
