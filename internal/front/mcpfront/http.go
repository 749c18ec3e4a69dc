package mcpfront

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is where the orchestrator serves Handler.
const Path = "/mcp"

// tokenKeyExtra is the auth.TokenInfo.Extra entry holding the API key a
// request authenticated with.
const tokenKeyExtra = "toolpool.key"

// Handler serves MCP over streamable HTTP: revision 2026-07-28 and later
// statelessly (any replica answers any request), older revisions with
// sessions whose signed ids any replica of the fleet serves (replicas.go).
// Every request passes the bearer check (Config.Token, Config.Keys) and
// the JSON-RPC checks first: a body over MaxBodyBytes, one that is not
// JSON, not a JSON-RPC message, a batch over MaxCalls, or a call of a
// method MCP does not have, is answered with the JSON-RPC error the spec
// names. Mount it on Path behind an httpapi.Server, whose gate checks
// Host and Origin.
func (s *Server) Handler() http.Handler {
	getServer := func(*http.Request) *mcp.Server { return s.mcp }
	stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Logger:              sdkLogger(s.cfg.Logger),
		MaxRequestBodyBytes: s.cfg.MaxBodyBytes,
		// Sessions idle for Config.SessionTimeout are closed by the
		// session table (sessions.go): the go-sdk does not see the calls
		// of the fast path.
		// The httpapi.Server in front checks Host and Origin for every
		// address it listens on.
		DisableLocalhostProtection: true,
	})
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		Logger:              sdkLogger(s.cfg.Logger),
		MaxRequestBodyBytes: s.cfg.MaxBodyBytes,
		// A 2026-07-28 request is its POST: a client that closes it
		// cancels the call.
		PropagateRequestCancellation: true,
		DisableLocalhostProtection:   true,
	})
	var inner http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			s.post(w, r, stateful, stateless)
			return
		}
		// The GET stream lasts as long as the session, so the gate's read
		// and write deadlines must not cut it.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
		if r.Method == http.MethodGet {
			ctx, end := s.streams.track(r.Context())
			defer end()
			r = r.WithContext(ctx)
		}
		if !s.serveOther(w, r, stateful, stateless) {
			stateful.ServeHTTP(w, r)
		}
	})
	if s.cfg.Closed != "" {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusForbidden, nil, &jsonrpc.Error{Code: codeUnauthorized, Message: s.cfg.Closed})
		})
	}
	if s.cfg.Token == "" && s.cfg.Keys.Len() == 0 {
		return inner
	}
	// The go-sdk's bearer middleware puts the token's info where the
	// tool middleware finds it (RequestExtra.TokenInfo); the token was
	// verified just before, so it takes that answer instead of verifying
	// again.
	verified := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		if info, ok := ctx.Value(verifiedKey{}).(*auth.TokenInfo); ok {
			return info, nil
		}
		return s.verify(ctx, token, r)
	}
	bearer := auth.RequireBearerToken(verified, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(inner)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Checked here first for the answer's shape: 401 with
		// WWW-Authenticate and a JSON-RPC error body.
		info, err := s.verify(r.Context(), bearerToken(r), r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolpool"`)
			writeError(w, http.StatusUnauthorized, nil, &jsonrpc.Error{Code: codeUnauthorized, Message: err.Error()})
			return
		}
		bearer.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verifiedKey{}, info)))
	})
}

// post serves a POST: its body checked as JSON-RPC, then a tools/call of
// the common shape on the fast path (fastcall.go), anything else by the
// go-sdk (routePost). Either way a POST of a session this process holds
// pauses its idle timer, and a notifications/cancelled of a fast call
// cancels it.
func (s *Server) post(w http.ResponseWriter, r *http.Request, stateful, stateless http.Handler) {
	var msgs [1]goodMessage
	n := 0
	var cancels []json.RawMessage
	var kind postKind
	ok := s.checkBody(w, r, func(m goodMessage) {
		if n == 0 {
			msgs[0] = m
		}
		n++
		kind.see(m)
		if m.id == nil && m.method == "notifications/cancelled" {
			cancels = append(cancels, m.params)
		}
	})
	if !ok {
		return
	}
	// The body is in: a call's answer takes as long as the call, so the
	// gate's read and write deadlines must not cut it.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	if n == 1 && s.serveTaskHTTP(w, r, msgs[0]) {
		return // a task request (tasks.go): any replica answers it
	}
	if v := r.Header.Get(headerPoolSession); v != "" && !goodPoolSession(v) {
		writeError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "the Toolpool-Session header must be 1 to 256 printable ASCII characters without spaces"})
		return
	}
	raw, ok := s.unsession(w, r)
	if !ok {
		return
	}
	if hs := s.sessions.owned(r); hs != nil {
		hs.startPOST()
		defer hs.endPOST()
		for _, p := range cancels {
			hs.cancelled(p)
		}
		if n == 1 && s.fastCall(w, r, hs, msgs[0]) {
			return
		}
	}
	s.routePost(w, r, kind, raw, stateful, stateless)
}

// verifiedKey is the context key of the auth.TokenInfo of a request whose
// bearer token was verified.
type verifiedKey struct{}

// codeUnauthorized is the JSON-RPC error code of a 401 body: in the range
// JSON-RPC leaves to servers.
const codeUnauthorized = -32001

// verify is the auth.TokenVerifier of /mcp: the MCP token, or an API key.
func (s *Server) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	if token == "" {
		return nil, fmt.Errorf("%w: /mcp needs a bearer token: send Authorization: Bearer <token>", auth.ErrInvalidToken)
	}
	if s.cfg.Token != "" {
		// Compared by hash: the time taken says nothing of the token.
		want, got := sha256.Sum256([]byte(s.cfg.Token)), sha256.Sum256([]byte(token))
		if subtle.ConstantTimeCompare(want[:], got[:]) == 1 {
			return &auth.TokenInfo{UserID: "mcp-token"}, nil
		}
	}
	if k, ok := s.cfg.Keys.Lookup(token); ok {
		return &auth.TokenInfo{UserID: "tenant:" + k.Tenant, Extra: map[string]any{tokenKeyExtra: k}}, nil
	}
	return nil, fmt.Errorf("%w: the bearer token is not valid", auth.ErrInvalidToken)
}

// bearerToken is the token of r's Authorization header, "" without one.
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// checkBody reads a POST body (at most MaxBodyBytes) and checks it as
// JSON-RPC; it answers a bad one and reports false, or puts the body back
// for the go-sdk and reports true, having called seen with each of its
// messages.
func (s *Server) checkBody(w http.ResponseWriter, r *http.Request, seen func(goodMessage)) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
				Message: fmt.Sprintf("the request is over the limit of %d bytes", tooLarge.Limit)})
			return false
		}
		writeError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "the request body could not be read"})
		return false
	}
	if bad := checkMessage(body, s.cfg.MaxCalls, seen); bad != nil {
		if bad.drop {
			w.WriteHeader(http.StatusAccepted)
			return false
		}
		status := http.StatusBadRequest
		if bad.err.Code == jsonrpc.CodeMethodNotFound {
			status = http.StatusOK // a JSON-RPC answer like any other
		}
		writeError(w, status, bad.id, bad.err)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

// writeError writes a JSON-RPC error response; id nil is JSON null (the
// request's id could not be read).
func writeError(w http.ResponseWriter, status int, id any, e *jsonrpc.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(errorResponse(id, e))
}

// EndStreams ends the standalone SSE streams (GET /mcp) open now and
// those opened later: they last as long as their session, so an HTTP
// server's drain would wait for them in vain; and the waits of
// tasks/result (tasks.go), answered with an error that says to ask again.
// Calls in progress are not touched. Call it before draining the HTTP
// server.
func (s *Server) EndStreams() { s.streams.endAll() }

// streams are the GET requests in progress.
type streams struct {
	mu    sync.Mutex
	ended bool
	open  map[*context.CancelFunc]struct{}
}

// track returns ctx ending when endAll is called.
func (st *streams) track(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ended {
		cancel()
		return ctx, func() {}
	}
	if st.open == nil {
		st.open = map[*context.CancelFunc]struct{}{}
	}
	st.open[&cancel] = struct{}{}
	return ctx, func() {
		st.mu.Lock()
		delete(st.open, &cancel)
		st.mu.Unlock()
		cancel()
	}
}

func (st *streams) endAll() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.ended = true
	for c := range st.open {
		(*c)()
	}
	st.open = nil
}
