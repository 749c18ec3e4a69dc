package mcpfront

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/infra/mcpwire"
	"github.com/toolpool/toolpool/internal/infra/startstop"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// ErrStopped is the cause the calls in progress are cancelled with when
// Stop's drain runs out.
var ErrStopped = errors.New("mcpfront: server stopped")

// progressBuffer is how many progress reports of one call wait to be sent;
// more are dropped (reports are snapshots: the next one says more).
const progressBuffer = 16

// Server is the pool as an MCP server: its tools/list is the live catalog,
// its tools/call runs through the Dispatcher. Serve it over streamable HTTP
// (Handler) or stdio (ServeStdio). Create it with New, then Start and Stop
// it.
type Server struct {
	startstop.Base // its life ends the calls in progress once Stop's drain is over

	cfg      Config
	mcp      *mcp.Server
	stdio    string // the pool session of a connection without a session id
	streams  streams
	sessions sessionTable           // the HTTP sessions, for the fast path of tools/call
	fast     atomic.Int64           // tools/calls served on the fast path (tests read it)
	key      atomic.Pointer[[]byte] // signs session ids: Config.SessionKey, or LoadSessionKey's

	mu       sync.Mutex
	listed   map[string]Tool // the tools the MCP server lists now
	active   int             // calls in progress
	draining bool            // Stop was called: no new call starts
	idle     chan struct{}   // made by Stop, closed once no call is in progress
}

// New returns a Server for cfg, with defaults applied. It touches no
// network.
func New(cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, stdio: "mcp-" + rand.Text(), listed: map[string]Tool{},
		sessions: sessionTable{timeout: cfg.SessionTimeout, max: cfg.MaxSessions, byID: map[string]*httpSession{}}}
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	if cfg.Tasks != nil {
		caps.AddExtension(TasksExtension, map[string]any{})
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: cfg.Name, Version: cfg.Version}, &mcp.ServerOptions{
		Logger: sdkLogger(cfg.Logger),
		// Tools only, with list_changed; no logging capability; the
		// Tasks extension with a store.
		Capabilities: caps,
	})
	s.key.Store(&cfg.SessionKey)
	s.mcp.AddReceivingMiddleware(s.middleware)
	if cfg.Tasks != nil {
		s.mcp.AddReceivingMiddleware(s.advertTasks) // outermost: tasks_advert.go
	}
	return s, nil
}

// Start lists the live tools and, with Config.Subscribe, follows their
// changes until Stop. Calls are served from Start to Stop.
func (s *Server) Start(ctx context.Context) error {
	err := s.Base.Start(ctx, func(context.Context) error {
		s.loadKey(ctx)
		s.sync(ctx)
		if s.cfg.Subscribe != nil {
			changes, cancel := s.cfg.Subscribe()
			s.Go(func(life context.Context) {
				defer cancel()
				s.follow(life, changes)
			})
		}
		return nil
	})
	if errors.Is(err, startstop.ErrStarted) {
		return fmt.Errorf("mcpfront: %w", err)
	}
	return err
}

// follow syncs the tools at each change, until life ends or changes is
// closed.
func (s *Server) follow(life context.Context, changes <-chan struct{}) {
	for {
		select {
		case _, ok := <-changes:
			if !ok {
				return
			}
			s.sync(life)
		case <-life.Done():
			return
		}
	}
}

// Stop lets the calls in progress finish until ctx is done, then cancels
// them (ErrStopped), stops following the catalog and closes the HTTP
// sessions it holds; from its start, new calls are refused. It returns
// ctx's cause when calls were cancelled.
// Stopped is closed once it has returned.
func (s *Server) Stop(ctx context.Context) error {
	idle := s.refuseCalls()
	err := s.Base.Stop(ctx, ErrStopped, func(ctx context.Context) error {
		select {
		case <-idle:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	s.sessions.closeAll()
	return err
}

// refuseCalls makes enter refuse new calls; the channel it returns is
// closed once no call is in progress.
func (s *Server) refuseCalls() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.draining {
		s.draining = true
		s.idle = make(chan struct{})
		if s.active == 0 {
			close(s.idle)
		}
	}
	return s.idle
}

// MCP is the go-sdk server underneath, e.g. to Run it on another
// transport.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// sync makes the MCP server's tools those of the catalog: the go-sdk then
// tells the connected clients (notifications/tools/list_changed).
func (s *Server) sync(ctx context.Context) {
	now := s.cfg.Tools(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[string]bool, len(now))
	for _, t := range now {
		seen[t.Name] = true
		if old, ok := s.listed[t.Name]; ok && sameTool(old, t) {
			continue
		}
		mt, err := mcpTool(t)
		if err != nil {
			s.cfg.Logger.Warn("a tool cannot be listed over MCP", "tool", t.Name, "err", err)
			continue
		}
		s.listed[t.Name] = t
		s.mcp.AddTool(mt, s.unreachable)
	}
	var gone []string
	for name := range s.listed {
		if !seen[name] {
			gone = append(gone, name)
			delete(s.listed, name)
		}
	}
	if len(gone) > 0 {
		s.mcp.RemoveTools(gone...)
	}
}

func sameTool(a, b Tool) bool {
	return a.Description == b.Description && a.Idempotent == b.Idempotent && hintsEqual(a.Hints, b.Hints) && bytes.Equal(a.InputSchema, b.InputSchema)
}

// mcpTool is t as MCP lists it. A schema the go-sdk would refuse (its
// root not an object) is an error, not a panic.
func mcpTool(t Tool) (*mcp.Tool, error) {
	var root struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(t.InputSchema, &root); err != nil || root.Type != "object" {
		return nil, errors.New(`the input schema's root is not {"type":"object"}`)
	}
	mt := &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
	if h := t.Hints; t.Idempotent || h != (tools.Hints{}) {
		mt.Annotations = &mcp.ToolAnnotations{
			IdempotentHint: t.Idempotent, ReadOnlyHint: h.ReadOnly != nil && *h.ReadOnly,
			DestructiveHint: h.Destructive, OpenWorldHint: h.OpenWorld,
		}
	}
	return mt, nil
}

// hintsEqual compares two tools' hints by value.
func hintsEqual(a, b tools.Hints) bool {
	eq := func(x, y *bool) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return eq(a.ReadOnly, b.ReadOnly) && eq(a.Destructive, b.Destructive) && eq(a.OpenWorld, b.OpenWorld)
}

// unreachable is the go-sdk handler of every tool: tools/call never
// reaches it, the middleware answers it.
func (s *Server) unreachable(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
}

// middleware answers tools/call through the pool, and narrows tools/list
// to the tools of the caller's API key.
func (s *Server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
			s.sessions.note(ss, req.GetExtra())
		}
		switch r := req.(type) {
		case *mcp.CallToolRequest:
			return s.call(ctx, r)
		case *mcp.ListToolsRequest:
			s.sync(ctx)
			res, err := next(ctx, method, req)
			if k := keyOf(r.Extra); err == nil && k != nil && k.Tools != nil {
				if lr, ok := res.(*mcp.ListToolsResult); ok {
					lr2 := *lr
					lr2.Tools = slices.DeleteFunc(slices.Clone(lr.Tools), func(t *mcp.Tool) bool { return !k.Allows(t.Name) })
					return &lr2, nil
				}
			}
			return res, err
		}
		return next(ctx, method, req)
	}
}

// call runs one tools/call the go-sdk read through the pool.
func (s *Server) call(ctx context.Context, req *mcp.CallToolRequest) (mcp.Result, error) {
	p := req.Params
	if p == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call needs params"}
	}
	in := callIn{name: p.Name, args: p.Arguments, key: keyOf(req.Extra), session: s.poolSession(req.Session, req.Extra, p.Meta),
		noCache: metaNoCache(p.Meta[MetaCache])}
	if s.cfg.Tracer.On() {
		var h http.Header
		if req.Extra != nil {
			h = req.Extra.Header
		}
		in.traceparent = traceparentOf(p.Meta, h)
	}
	if tok := p.GetProgressToken(); tok != nil && req.Session != nil {
		in.progress, in.notify = tok, req.Session.NotifyProgress
	}
	v, _ := p.Meta[mcp.MetaKeyProtocolVersion].(string)
	if newProtocol(v) {
		var user string
		if req.Extra != nil && req.Extra.TokenInfo != nil {
			user = req.Extra.TokenInfo.UserID
		}
		if in.host = hostOf(p.Meta, user); in.host != nil {
			in.host.state, in.host.responses = p.RequestState, p.InputResponses
		}
	}
	res, err := s.run(ctx, in)
	if err == nil && newProtocol(v) {
		res = complete(res)
	}
	return res, err
}

// callIn is one tools/call, as the go-sdk or the fast path (fastcall.go)
// read it.
type callIn struct {
	name     string
	args     json.RawMessage // the arguments as sent; nil when missing
	key      *apikey.Key     // the API key the request authenticated with, if any
	session  string          // the pool session
	progress any             // the client's progressToken; nil: none
	// notify sends a notifications/progress on the request's stream.
	notify  func(context.Context, *mcp.ProgressNotificationParams) error
	noCache bool      // _meta asks for a fresh run (MetaCache)
	host    *hostCall // a 2026-07-28 host that declares elicitation; nil otherwise
	callID  string    // the pool call id (run sets it)
	// traceparent is the request's trace context (_meta, else the HTTP
	// header), the parent of the call's span with tracing on (trace.go).
	traceparent string
}

// run runs one tools/call through the pool. ctx ends when the client
// cancels the call.
func (s *Server) run(ctx context.Context, c callIn) (out mcp.Result, err error) {
	key := c.key
	if s.cfg.Tracer.On() { // trace.go
		var span trace.Span
		ctx, span = s.startCallSpan(ctx, c.name, c.traceparent, tenantOf(key))
		defer func() { endCallSpan(span, out, err) }()
	}
	if key != nil && !key.Allows(c.name) {
		return nil, s.unknownTool(ctx, c.name, key)
	}
	input, kind := arguments(c.args)
	if kind != "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: classify.ArgumentsNotObjectMessage(c.name, kind)}
	}
	if !s.enter() {
		return errorResult(classify.ShuttingDownMessage(c.name)), nil
	}
	defer s.leave()
	// The call ends when the client cancels it (notifications/cancelled),
	// or when Stop's drain runs out.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	life := s.Life()
	stop := context.AfterFunc(life, func() { cancel(context.Cause(life)) })
	defer stop()
	if key != nil {
		// The key's tenant, its weight in fair shares and its calls'
		// default priority, as on the HTTP API.
		ctx = dispatch.WithPriority(dispatch.WithWeight(dispatch.WithTenant(ctx, key.Tenant), key.Weight), key.Priority)
	}
	ctx = s.withTraceparent(ctx) // trace.go
	if c.progress != nil && c.notify != nil {
		relay := newProgressRelay(ctx, c.notify, c.progress, s.cfg.Logger)
		defer relay.close()
		ctx = dispatch.WithProgress(ctx, relay.report)
	}
	rep := &policy.Report{}
	ctx = withPolicy(ctx, &c, rep)
	c.callID = "mcp_" + rand.Text()
	hr, err := s.hostRound(ctx, &c, input) // approve.go
	if err != nil {
		return nil, err
	}
	if hr != nil && !hr.wait {
		ctx = policy.WithoutApprovalWait(ctx)
	}
	results, err := s.cfg.Dispatcher.Dispatch(ctx, c.session,
		[]envelope.ToolUseBlock{{Type: "tool_use", ID: c.callID, Name: c.name, Input: input}})
	var saturated *dispatch.SaturatedError
	var over *policy.ExhaustedError
	switch {
	case errors.As(err, &saturated):
		r := dispatch.SaturatedResult("", c.name, saturated)
		return toolResult(&r), nil
	case errors.As(err, &over) && len(over.Results) == 1:
		return toolResult(&over.Results[0]), nil // over budget: the budget's words
	case err != nil && errors.Is(context.Cause(ctx), ErrStopped):
		return errorResult(classify.ShuttingDownMessage(c.name)), nil
	case err != nil && ctx.Err() != nil:
		return nil, context.Cause(ctx) // the client cancelled it: nobody reads this
	case errors.Is(err, dispatch.ErrUnavailable):
		return errorResult(classify.PoolUnavailableMessage(c.name)), nil
	case err != nil || len(results) != 1:
		s.cfg.Logger.WarnContext(ctx, "dispatching an MCP tool call failed", "tool", c.name, "err", err, "results", len(results))
		return errorResult(classify.NotPreparedMessage(c.name)), nil
	}
	r := &results[0]
	if r.IsError && r.Code == classify.CodeUnknownTool {
		if key != nil && key.Tools != nil {
			return nil, s.unknownTool(ctx, c.name, key)
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: r.Content.Text()}
	}
	if ask := s.askHost(hr, rep, r, &c, input); ask != nil {
		return ask, nil // input_required: the host decides the approval
	}
	res := toolResult(r)
	addCacheMeta(res, rep)
	return res, nil
}

// enter counts a call in, unless Stop was called.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	s.active++
	return true
}

// leave counts a call out.
func (s *Server) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active--
	if s.active == 0 && s.draining {
		close(s.idle) // once: no call enters once draining
	}
}

// unknownTool is the protocol error of a call to a tool that does not
// exist, or that key may not call: its text lists the tools the caller
// may call (the unknown-tool text of the HTTP API).
func (s *Server) unknownTool(ctx context.Context, name string, key *apikey.Key) error {
	var available []string
	for _, t := range s.cfg.Tools(ctx) {
		if key == nil || key.Allows(t.Name) {
			available = append(available, t.Name)
		}
	}
	d := classify.Classify(&classify.UnknownToolError{Tool: name, Available: available})
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: d.Message(classify.MessageInput{Tool: name})}
}

// arguments is the call's input: missing or null arguments are {}; kind,
// when not empty, names what the arguments are instead of an object.
func arguments(raw json.RawMessage) (json.RawMessage, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`), ""
	}
	switch raw[0] {
	case '{':
		return raw, ""
	case '[':
		return nil, "an array"
	case '"':
		return nil, "a string"
	case 't', 'f':
		return nil, "a boolean"
	}
	return nil, "a number"
}

// toolResult is the MCP result of a pool result.
func toolResult(r *envelope.Result) *mcp.CallToolResult {
	out := &mcp.CallToolResult{Content: mcpwire.FromPool(r.Content), IsError: r.IsError}
	if r.IsError {
		meta := mcp.Meta{"io.toolpool/class": string(r.Class), "io.toolpool/code": r.Code}
		if r.Attempts > 0 {
			meta["io.toolpool/attempts"] = r.Attempts
		}
		out.Meta = meta
	}
	return out
}

// errorResult is an isError result the server writes itself: the call
// was not run.
func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: true}
}

// progressRelay sends the progress reports of one call as
// notifications/progress with the client's token. report does not block
// (dispatch.ProgressFunc): reports go through a buffer, sent in order by
// a goroutine of their own; when it is full they are dropped.
type progressRelay struct {
	ctx    context.Context // the request's: its stream carries the notifications
	notify func(context.Context, *mcp.ProgressNotificationParams) error
	token  any
	log    *slog.Logger
	ch     chan tools.Progress
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	shut   bool
}

func newProgressRelay(ctx context.Context, notify func(context.Context, *mcp.ProgressNotificationParams) error, token any, log *slog.Logger) *progressRelay {
	r := &progressRelay{ctx: ctx, notify: notify, token: token, log: log, ch: make(chan tools.Progress, progressBuffer), done: make(chan struct{})}
	go r.run()
	return r
}

// report is the call's dispatch.ProgressFunc.
func (r *progressRelay) report(_ string, p tools.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shut {
		return
	}
	select {
	case r.ch <- p:
	default:
	}
}

func (r *progressRelay) run() {
	defer close(r.done)
	for p := range r.ch {
		err := r.notify(r.ctx, &mcp.ProgressNotificationParams{
			ProgressToken: r.token, Progress: p.Progress, Total: p.Total, Message: p.Message,
		})
		if err != nil {
			r.log.Debug("sending a progress notification failed", "err", err)
		}
	}
}

// close sends the reports left and ends the relay: the result goes after
// its progress.
func (r *progressRelay) close() {
	r.once.Do(func() {
		r.mu.Lock()
		r.shut = true
		close(r.ch)
		r.mu.Unlock()
		<-r.done
	})
}

// keyOf is the API key the request authenticated with over HTTP, if any.
func keyOf(extra *mcp.RequestExtra) *apikey.Key {
	if extra == nil {
		return nil
	}
	return keyOfInfo(extra.TokenInfo)
}

// sdkLogger is log for the go-sdk: its warnings and errors only (it logs
// every session's start and end at info).
func sdkLogger(log *slog.Logger) *slog.Logger {
	return slog.New(warnOnly{log.Handler()})
}

type warnOnly struct{ slog.Handler }

// Enabled lets warnings and errors through.
func (h warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

// WithAttrs keeps the filter.
func (h warnOnly) WithAttrs(as []slog.Attr) slog.Handler { return warnOnly{h.Handler.WithAttrs(as)} }

// WithGroup keeps the filter.
func (h warnOnly) WithGroup(name string) slog.Handler { return warnOnly{h.Handler.WithGroup(name)} }
