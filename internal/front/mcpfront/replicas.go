package mcpfront

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// How /mcp serves a fleet of replicas behind a load balancer (see
// docs/mcp.md, "Replicas and sessions"):
//
//   - A request of revision 2026-07-28 or later (its MCP-Protocol-Version
//     header), a server/discover, and a request whose _meta names a
//     protocol revision, go to the go-sdk's stateless handler: each is
//     served on its own, with nothing of another request, so any replica
//     answers it.
//   - Older revisions keep initialize and Mcp-Session-Id. The session id
//     a replica issues is signed (HMAC-SHA256 with Config.SessionKey,
//     which every replica of a fleet shares) over a random part and the
//     credential that opened the session. The replica that holds the
//     session serves its requests as a session (progress, cancellation,
//     the GET stream); any other replica checks the signature and serves
//     the request statelessly, as the go-sdk serves a request without a
//     session, under the same pool session. A session over
//     Config.MaxSessions is served that way on every replica.

// Header names of the streamable HTTP transport.
const (
	headerSessionID = "Mcp-Session-Id"
	headerVersion   = "Mcp-Protocol-Version"
	// headerPoolSession names the pool session of a 2026-07-28 request,
	// as on the HTTP API (httpapi.HeaderSession).
	headerPoolSession = "Toolpool-Session"
)

// statelessVersion is the first protocol revision without sessions.
const statelessVersion = "2026-07-28"

// SessionKeyBytes is the least length of Config.SessionKey.
const SessionKeyBytes = 32

// rawIDLen is the length of a session id's random part (rand.Text).
const rawIDLen = 26

// sigLen is the length of a session id's signature: 16 bytes of
// HMAC-SHA256, base64url.
const sigLen = 22

// newProtocol reports whether v, an MCP-Protocol-Version header, names a
// revision without sessions (2026-07-28 or later).
func newProtocol(v string) bool {
	return len(v) == len(statelessVersion) && v >= statelessVersion
}

// signSession is the session id a client sees for the go-sdk's session
// raw, opened with the credential of user.
func (s *Server) signSession(raw, user string) string {
	return raw + "." + s.sessionMAC(raw, user)
}

func (s *Server) sessionMAC(raw, user string) string {
	m := hmac.New(sha256.New, *s.key.Load())
	m.Write([]byte("toolpool mcp session\x00"))
	m.Write([]byte(raw))
	m.Write([]byte{0})
	m.Write([]byte(user))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// openSession is the go-sdk's session id of id, a session id a client
// sent, when a replica of the fleet issued it to the credential of r;
// false otherwise.
func (s *Server) openSession(r *http.Request, id string) (string, bool) {
	raw, sig, ok := strings.Cut(id, ".")
	if !ok || len(raw) != rawIDLen || len(sig) != sigLen {
		return "", false
	}
	want := s.sessionMAC(raw, userOf(r))
	return raw, hmac.Equal([]byte(sig), []byte(want))
}

// loadKey takes the fleet's key from Config.LoadSessionKey, if set.
func (s *Server) loadKey(ctx context.Context) {
	if s.cfg.LoadSessionKey == nil {
		return
	}
	key, err := s.cfg.LoadSessionKey(ctx)
	if err == nil && len(key) < SessionKeyBytes {
		err = fmt.Errorf("the key is %d bytes, under %d", len(key), SessionKeyBytes)
	}
	if err != nil {
		s.cfg.Logger.Warn("no session key shared with other replicas: MCP sessions of revisions before 2026-07-28 are served by this replica only", "err", err)
		return
	}
	s.key.Store(&key)
}

// userOf is the credential's user of r ("" without authentication).
func userOf(r *http.Request) string {
	if info := auth.TokenInfoFromContext(r.Context()); info != nil {
		return info.UserID
	}
	return ""
}

// sessionNotFound answers a session id no replica issued to this
// credential: 404, after which the spec has the client start a new
// session.
func sessionNotFound(w http.ResponseWriter) {
	writeError(w, http.StatusNotFound, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: "session not found: start a new session (initialize without Mcp-Session-Id)"})
}

// unsession makes r's Mcp-Session-Id the go-sdk's id of the session it
// names; false, with the 404 written, when no replica issued it to r's
// credential. A request without one is left as it is.
func (s *Server) unsession(w http.ResponseWriter, r *http.Request) (raw string, ok bool) {
	id := r.Header.Get(headerSessionID)
	if id == "" {
		return "", true
	}
	raw, ok = s.openSession(r, id)
	if !ok {
		sessionNotFound(w)
		return "", false
	}
	r.Header.Set(headerSessionID, raw)
	return raw, true
}

// serveOther serves a GET or DELETE (and any other method) of /mcp. A
// session this replica does not hold has no GET stream here (405, which
// clients take as "no stream"), and its DELETE has nothing to end (204).
func (s *Server) serveOther(w http.ResponseWriter, r *http.Request, stateful, stateless http.Handler) bool {
	if newProtocol(r.Header.Get(headerVersion)) {
		stateless.ServeHTTP(w, r)
		return true
	}
	raw, ok := s.unsession(w, r)
	if !ok {
		return true
	}
	if raw == "" || s.sessions.has(raw) {
		return false
	}
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Allow", "POST, DELETE")
		writeError(w, http.StatusMethodNotAllowed, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "this replica holds no stream of the session: listen on a POST's stream, or list the tools again"})
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	default:
		stateful.ServeHTTP(w, r) // the go-sdk's 405
	}
	return true
}

// metaProtoKey is the _meta key naming a request's protocol revision.
var metaProtoKey = []byte(mcp.MetaKeyProtocolVersion)

// postKind is what a POST's messages say about where it is served.
type postKind struct {
	initialize bool // an initialize request
	discover   bool // a server/discover request
	metaProto  bool // a message whose _meta may name a protocol revision
	listen     bool // a subscriptions/listen: its stream lasts until the client ends it
}

func (k *postKind) see(m goodMessage) {
	switch m.method {
	case "initialize":
		k.initialize = true
	case "server/discover":
		k.discover = true
	case "subscriptions/listen":
		k.listen = true
	}
	if !k.metaProto && len(m.params) > 0 && bytes.Contains(m.params, metaProtoKey) {
		k.metaProto = true
	}
}

// routePost serves a checked POST that does not go on the fast path:
// by the stateless handler (2026-07-28, discovery, a session this
// replica does not hold, a new session over the cap), or by the stateful
// one, which signs the id of a session it opens.
func (s *Server) routePost(w http.ResponseWriter, r *http.Request, kind postKind, raw string, stateful, stateless http.Handler) {
	switch {
	case newProtocol(r.Header.Get(headerVersion)):
		stateless.ServeHTTP(w, r)
	case raw != "":
		if s.sessions.has(raw) {
			// The go-sdk names the session in some answers (to a
			// repeated initialize): by its bare id, which the client
			// must not take for the one it was issued.
			user := userOf(r)
			stateful.ServeHTTP(&signingWriter{ResponseWriter: w, sign: func(raw string) string { return s.signSession(raw, user) }}, r)
		} else {
			stateless.ServeHTTP(w, r)
		}
	case kind.discover || kind.metaProto:
		stateless.ServeHTTP(w, r)
	case kind.initialize:
		user := userOf(r)
		if !s.sessions.reserve() {
			// Over the cap: a session no replica holds, served as on a
			// replica that does not know it.
			w.Header().Set(headerSessionID, s.signSession(rand.Text(), user))
			stateless.ServeHTTP(w, r)
			return
		}
		defer s.sessions.release()
		stateful.ServeHTTP(&signingWriter{ResponseWriter: w, sign: func(raw string) string { return s.signSession(raw, user) }}, r)
	default:
		stateful.ServeHTTP(w, r)
	}
}

// signingWriter signs the session id the go-sdk sets on its answer to an
// initialize (or to a request of a session it holds).
type signingWriter struct {
	http.ResponseWriter
	sign   func(raw string) string
	signed bool
}

func (w *signingWriter) fix() {
	if w.signed {
		return
	}
	w.signed = true
	h := w.Header()
	if raw := h.Get(headerSessionID); raw != "" {
		h.Set(headerSessionID, w.sign(raw))
	}
}

// WriteHeader signs the session id, then writes the header.
func (w *signingWriter) WriteHeader(code int) {
	w.fix()
	w.ResponseWriter.WriteHeader(code)
}

// Write signs the session id, then writes b.
func (w *signingWriter) Write(b []byte) (int, error) {
	w.fix()
	return w.ResponseWriter.Write(b)
}

// Flush signs the session id, then flushes.
func (w *signingWriter) Flush() {
	w.fix()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap is the ResponseWriter underneath, for http.ResponseController.
func (w *signingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// poolSession is the pool session of a request the go-sdk serves, which
// scopes the advice after repeated failures: for a session of an older
// revision, its id (the same on every replica); for a 2026-07-28 request
// over HTTP, its Toolpool-Session header if it has a good one, else the
// client's identity (the credential, and the clientInfo of its _meta);
// over stdio, one per process.
func (s *Server) poolSession(ss *mcp.ServerSession, extra *mcp.RequestExtra, meta map[string]any) string {
	if ss != nil {
		if id := ss.ID(); id != "" {
			return "mcp-" + id
		}
	}
	if extra == nil || extra.Header == nil {
		return s.stdio
	}
	var user string
	if extra.TokenInfo != nil {
		user = extra.TokenInfo.UserID
	}
	return s.poolSessionOf(extra.Header, user, meta)
}

// poolSessionOf is the pool session of an HTTP request without a session
// this process holds, with the headers h, of the credential's user, with
// the _meta meta (see poolSession).
func (s *Server) poolSessionOf(h http.Header, user string, meta map[string]any) string {
	if id := h.Get(headerSessionID); id != "" {
		return "mcp-" + id // a session this replica does not hold: its checked id
	}
	if v := h.Get(headerPoolSession); goodPoolSession(v) {
		return v
	}
	var name, version string
	if ci, ok := meta[mcp.MetaKeyClientInfo].(map[string]any); ok {
		name, _ = ci["name"].(string)
		version, _ = ci["version"].(string)
	}
	sum := sha256.Sum256([]byte(user + "\x00" + name + "\x00" + version))
	return "mcp-client-" + hex.EncodeToString(sum[:12])
}

// goodPoolSession reports whether v is a session the HTTP API would take:
// 1 to 256 printable ASCII characters, no spaces.
func goodPoolSession(v string) bool {
	if v == "" || len(v) > 256 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= ' ' || v[i] > '~' {
			return false
		}
	}
	return true
}

// completeResult is a CallToolResult with resultType "complete", which
// 2026-07-28 answers carry: the go-sdk sets it only on the results of its
// own tool handlers, and has no exported way to set it.
var completeResult = func() mcp.CallToolResult {
	var r mcp.CallToolResult
	if err := json.Unmarshal([]byte(`{"content":[],"resultType":"complete"}`), &r); err != nil {
		panic(err) // a constant
	}
	return r
}()

// complete is res with resultType "complete", for a 2026-07-28 request.
func complete(res mcp.Result) mcp.Result {
	r, ok := res.(*mcp.CallToolResult)
	if !ok || r == nil || r.NeedsInput() {
		return res
	}
	out := completeResult
	out.Meta, out.Content, out.StructuredContent, out.IsError = r.Meta, r.Content, r.StructuredContent, r.IsError
	return &out
}
