package mcpfront

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// The fast path of a 2026-07-28 tools/call (see fastcall.go for the
// older revisions): the go-sdk's stateless handler connects a session for
// each request, which doubled the CPU of a call (docs/mcp.md). A
// tools/call whose headers and _meta are all as the spec has them is
// served here, with the bytes the go-sdk would write; anything else —
// a header missing or not matching the body, a _meta the go-sdk would
// refuse, an Mcp-Param-* header — goes to the go-sdk, which answers it
// (with the spec's errors). The call ends when its request does, as with
// the go-sdk's PropagateRequestCancellation.

// newMetaKeys are the keys of the protocol's own a 2026-07-28 tools/call's
// _meta may hold on the fast path.
var newMetaKeys = map[string]bool{
	mcp.MetaKeyProtocolVersion: true, mcp.MetaKeyClientInfo: true,
	mcp.MetaKeyClientCapabilities: true, mcp.MetaKeyLogLevel: true,
}

// readFastParams26 reads the params of a 2026-07-28 tools/call of the
// common shape, with its _meta; ok is false for params the fast path
// leaves to the go-sdk (readFastParams's rules, and a _meta that does
// not name version with an object of clientCapabilities, or whose
// clientInfo is not an object with a string name).
func readFastParams26(params json.RawMessage, version string) (p fastParams, meta map[string]any, ok bool) {
	var fields map[string]json.RawMessage
	if len(params) == 0 || params[0] != '{' || json.Unmarshal(params, &fields) != nil {
		return p, nil, false
	}
	for k, v := range fields {
		switch k {
		case "name":
			if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &p.name) != nil {
				return p, nil, false
			}
		case "arguments":
			p.args = v
		case "_meta":
			if len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &meta) != nil {
				return p, nil, false
			}
		default:
			return p, nil, false
		}
	}
	for mk, mv := range meta {
		if strings.HasPrefix(mk, "io.modelcontextprotocol/") && !newMetaKeys[mk] {
			return p, nil, false
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
	if v, _ := meta[mcp.MetaKeyProtocolVersion].(string); v != version {
		return p, nil, false
	}
	if _, isObject := meta[mcp.MetaKeyClientCapabilities].(map[string]any); !isObject {
		return p, nil, false
	}
	if ci, present := meta[mcp.MetaKeyClientInfo]; present {
		obj, isObject := ci.(map[string]any)
		if !isObject {
			return p, nil, false
		}
		if _, named := obj["name"].(string); !named {
			return p, nil, false
		}
		if v, has := obj["version"]; has {
			if _, isString := v.(string); !isString {
				return p, nil, false
			}
		}
	}
	return p, meta, true
}

// fastCall26 reports whether the POST r, whose one message is m, is a
// 2026-07-28 tools/call the fast path serves; if so it has served it.
func (s *Server) fastCall26(w http.ResponseWriter, r *http.Request, m goodMessage) bool {
	h := r.Header
	version := h.Get(headerVersion)
	if m.batch || m.id == nil || m.method != "tools/call" || version != statelessVersion ||
		h.Get("Mcp-Method") != "tools/call" || !plainPOST26(r) {
		return false
	}
	p, meta, ok := readFastParams26(m.params, version)
	if !ok || p.name == "" || h.Get("Mcp-Name") != p.name {
		return false
	}
	s.fast.Add(1)
	hd := w.Header()
	hd.Set("Cache-Control", "no-cache, no-transform")
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Connection", "keep-alive")
	out := &sseStream{w: w}
	info := auth.TokenInfoFromContext(r.Context())
	var user string
	if info != nil {
		user = info.UserID
	}
	in := callIn{name: p.name, args: p.args, key: keyOfInfo(info), session: s.poolSessionOf(h, user, meta), noCache: p.noCache,
		host: hostOf(meta, user)}
	if s.cfg.Tracer.On() {
		in.traceparent = cmp.Or(p.traceparent, h.Get(envelope.HeaderTraceparent))
	}
	if p.progress != nil {
		in.progress, in.notify = p.progress, out.notify
	}
	res, err := s.run(r.Context(), in)
	if err != nil {
		if status := newProtocolErrorStatus(err); status != 0 {
			writeError(w, status, m.id, wireError(err))
			return true
		}
		out.respond(m.id, nil, err)
		return true
	}
	res = complete(res)
	if cr, ok := res.(*mcp.CallToolResult); ok {
		if cr.Meta == nil {
			cr.Meta = mcp.Meta{}
		}
		cr.Meta[mcp.MetaKeyServerInfo] = &mcp.Implementation{Name: s.cfg.Name, Version: s.cfg.Version}
	}
	out.respond(m.id, res, nil)
	return true
}

// plainPOST26 reports whether r's headers are those the go-sdk's
// stateless handler serves a call with: plainPOST's, with no
// Mcp-Param-* header (which the go-sdk checks against the tool's schema).
func plainPOST26(r *http.Request) bool {
	h := r.Header
	ct := h.Get("Content-Type")
	if ct != "application/json" && baseType(ct) != "application/json" {
		return false
	}
	if len(h.Values("Last-Event-Id")) > 0 {
		return false
	}
	for k := range h {
		if strings.HasPrefix(k, "Mcp-Param-") {
			return false
		}
	}
	jsonOK, sseOK := accepts(h.Values("Accept"))
	return jsonOK && sseOK
}

// newProtocolErrorStatus is the HTTP status the go-sdk answers a
// 2026-07-28 request's error with, as a plain JSON body: 404 for "method
// not found", 400 for invalid params and the protocol's own; 0: the error
// goes on the SSE stream like a result.
func newProtocolErrorStatus(err error) int {
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		return 0
	}
	switch je.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return 0
}
