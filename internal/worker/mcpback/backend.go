package mcpback

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cenkalti/backoff/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/infra/startstop"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/tools"
)

// ErrStopped is the cause given to the Backend's work when Stop ends it.
var ErrStopped = errors.New("mcpback: backend stopped")

// ErrNotStarted is what Check reports before Start has succeeded.
var ErrNotStarted = errors.New("mcpback: the MCP server has not started")

// Backend is the client of one MCP server, serving its tools. Create it
// with New, then Start and Stop it. Its lifecycle is a startstop.Base,
// started once a Start attempt is up: the sessions' supervisors and the
// list refreshes run until its life ends, and the sessions are closed then.
type Backend struct {
	startstop.Base

	cfg    Config
	client *mcp.Client

	sessions []*session
	progress sync.Map // progress token → func(tools.Progress)
	tokens   atomic.Uint64
	// refresh asks for the tools to be listed again (list_changed): a
	// signal the refresher takes once started; signals that come while a
	// refresh runs make one more.
	refresh chan struct{}

	startMu sync.Mutex // serializes the attempts of Start
	mu      sync.Mutex
	remotes map[string]*remoteTool // pool name → the server's tool
	order   []string               // the names of the tools registered, in the server's order
	served  []tools.Tool           // the tools of order the server still lists
	failure error                  // why Start failed; nil once started

	// listMu serializes the list refreshes and what OnChange hears: a
	// later list is applied, and told, after an earlier one.
	listMu sync.Mutex
}

// New checks cfg and returns a Backend. It starts nothing.
func New(cfg Config) (*Backend, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, remotes: map[string]*remoteTool{}, failure: ErrNotStarted, refresh: make(chan struct{}, 1)}
	b.client = mcp.NewClient(&mcp.Implementation{Name: "toolpool", Version: "1"}, &mcp.ClientOptions{
		Capabilities:                &mcp.ClientCapabilities{},
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { b.listChanged() },
		ProgressNotificationHandler: b.onProgress,
	})
	for i := range cfg.Sessions {
		b.sessions = append(b.sessions, &session{b: b, index: i})
	}
	return b, nil
}

// Name is the server's name (Config.Name).
func (b *Backend) Name() string { return b.cfg.Name }

// Start connects every session and lists the server's tools. It returns
// once all sessions are up, or with the first error, having stopped what
// it started; a Backend whose Start failed may be started again. A Stop
// ends an attempt under way (Start then returns ErrStopped).
func (b *Backend) Start(ctx context.Context) error {
	b.startMu.Lock()
	defer b.startMu.Unlock()
	switch {
	case b.Err() == nil:
		return errors.New("mcpback: already started")
	case b.stopped():
		return ErrStopped
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.cfg.StartTimeout)
		defer cancel()
	}
	actx, cancel := b.untilStop(ctx)
	defer cancel()
	if err := b.start(actx); err != nil {
		if b.stopped() {
			return ErrStopped
		}
		b.mu.Lock()
		b.failure = err
		b.mu.Unlock()
		b.cfg.Metrics.StartFailed(b.cfg.Name)
		return err
	}
	// The attempt is up: the Backend's life begins (unless Stop came first).
	err := b.Base.Start(context.WithoutCancel(ctx), func(context.Context) error {
		for _, s := range b.sessions {
			b.Go(s.supervise)
		}
		b.Go(b.refresher)
		b.Go(func(life context.Context) {
			<-life.Done()
			b.closeSessions() // the supervisors see their sessions end, and return
		})
		return nil
	})
	if err != nil {
		b.closeSessions()
		return ErrStopped
	}
	b.mu.Lock()
	b.failure = nil
	b.mu.Unlock()
	b.cfg.Logger.Info("MCP server started", "server", b.cfg.Name, "sessions", len(b.sessions), "tools", len(b.Tools()))
	return nil
}

// stopped reports whether Stop has stopped the Backend.
func (b *Backend) stopped() bool {
	select {
	case <-b.Base.Stopped():
		return true
	default:
		return false
	}
}

// untilStop is ctx, ended with ErrStopped by a Stop too: a Stop of a
// Backend not started yet returns at once, and an attempt to start it
// does not outlast it.
func (b *Backend) untilStop(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-b.Base.Stopped():
			cancel(ErrStopped)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

func (b *Backend) start(ctx context.Context) error {
	errs := make([]error, len(b.sessions))
	var wg sync.WaitGroup
	for i, s := range b.sessions {
		wg.Go(func() { errs[i] = s.connect(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.closeSessions()
		return fmt.Errorf("mcpback: server %s: %w", b.cfg.Name, b.redactErr(err))
	}
	remotes, served, err := b.list(ctx, b.sessions[0].current())
	if err != nil {
		b.closeSessions()
		return fmt.Errorf("mcpback: server %s: listing its tools: %w", b.cfg.Name, b.redactErr(err))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.remotes, b.served = remotes, served
	b.order = make([]string, len(served))
	for i, t := range served {
		b.order[i] = t.Name
	}
	return nil
}

// Tools are the server's tools as pool tools, once started: the ones
// Config.Tools selects, named with Config.Prefix.
func (b *Backend) Tools() []tools.Tool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]tools.Tool(nil), b.served...)
}

// Err is why the server is not serving: Start's error, ErrNotStarted
// before Start, nil once started.
func (b *Backend) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failure
}

// Check is the Backend's readiness check, named "mcp:<name>": it fails
// while the server is not started or no session is up.
func (b *Backend) Check() health.Check {
	return health.Check{Name: "mcp:" + b.cfg.Name, Func: func(context.Context) error {
		if err := b.Err(); err != nil {
			return err
		}
		if b.pick() == nil {
			return errors.New("no session to the MCP server is up; restarting it")
		}
		return nil
	}}
}

// Stop ends the sessions (a stdio server gets its stdin closed, then
// SIGTERM after Config.TerminateGrace) and waits for the Backend's
// goroutines until ctx ends; it returns nil once they have ended, or
// ctx.Err(). Calls still running fail with a lost connection. It is
// idempotent.
func (b *Backend) Stop(ctx context.Context) error {
	go func() { _ = b.Base.Stop(context.Background(), ErrStopped, nil) }() // waits for the goroutines
	select {
	case <-b.Base.Stopped():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *Backend) closeSessions() {
	var wg sync.WaitGroup
	for _, s := range b.sessions {
		wg.Go(s.close)
	}
	wg.Wait()
}

// pick is the session with the fewest calls in flight, nil when none is
// up.
func (b *Backend) pick() *session {
	var best *session
	var bestN int64
	for _, s := range b.sessions {
		if s.current() == nil {
			continue
		}
		if n := s.inFlight.Load(); best == nil || n < bestN {
			best, bestN = s, n
		}
	}
	return best
}

// redact replaces every secret in s.
func (b *Backend) redact(s string) string {
	for _, sec := range b.cfg.Secrets {
		if sec != "" && strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return s
}

// redactErr returns err, or an error of the same chain whose text holds
// no secret.
func (b *Backend) redactErr(err error) error {
	if err == nil {
		return nil
	}
	if msg := err.Error(); b.redact(msg) != msg {
		return &redactedError{err: err, msg: b.redact(msg)}
	}
	return err
}

type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// session is one connection to the server (stdio: one process).
type session struct {
	b        *Backend
	index    int
	inFlight atomic.Int64

	mu     sync.Mutex
	cs     *mcp.ClientSession // nil while down
	stderr *tailWriter        // the stdio server's last words
	pgid   int                // the stdio server's process group
}

func (s *session) current() *mcp.ClientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cs
}

// connect starts a connection and keeps it as the session's.
func (s *session) connect(ctx context.Context) error {
	b := s.b
	var t mcp.Transport
	var stderr *tailWriter
	var cmd *exec.Cmd
	if len(b.cfg.Command) > 0 {
		cmd = exec.Command(b.cfg.Command[0], b.cfg.Command[1:]...)
		cmd.Env, cmd.Dir = b.cfg.Env, b.cfg.Dir
		stderr = &tailWriter{max: 2 << 10}
		cmd.Stderr = stderr
		cmd.WaitDelay = b.cfg.TerminateGrace // a child left holding stderr does not hold up Close
		setProcessGroup(cmd)
		t = &mcp.CommandTransport{Command: cmd, TerminateDuration: b.cfg.TerminateGrace}
	} else {
		client := b.cfg.HTTPClient
		if client == nil {
			client = http.DefaultClient
		}
		c := *client
		c.Transport = &headerTransport{base: transportOr(client.Transport), header: b.cfg.Header}
		client = &c
		t = &mcp.StreamableClientTransport{Endpoint: b.cfg.URL, HTTPClient: client}
	}
	cs, err := b.client.Connect(ctx, t, nil)
	pgid := 0
	if cmd != nil && cmd.Process != nil {
		pgid = cmd.Process.Pid
	}
	if err != nil {
		killGroup(pgid)
		if tail := stderr.String(); tail != "" {
			return fmt.Errorf("session %d: %w (its stderr ends: %s)", s.index, err, tail)
		}
		return fmt.Errorf("session %d: %w", s.index, err)
	}
	s.mu.Lock()
	s.cs, s.stderr, s.pgid = cs, stderr, pgid
	s.mu.Unlock()
	return nil
}

// close ends the session's connection, if any.
func (s *session) close() {
	s.mu.Lock()
	cs, pgid := s.cs, s.pgid
	s.cs, s.pgid = nil, 0
	s.mu.Unlock()
	if cs != nil {
		_ = cs.Close() // stdin closed; SIGTERM, then SIGKILL after TerminateGrace each
	}
	killGroup(pgid) // what the server started
}

// supervise waits for the session's connection to end and, unless the
// Backend's life is over, connects it again with backoff: calls that were
// running on it have failed (transient) and are retried by the pool.
func (s *session) supervise(life context.Context) {
	b := s.b
	restart := false
	for {
		if cs := s.current(); cs != nil {
			if restart {
				b.cfg.Metrics.SessionUp(b.cfg.Name, true)
				b.cfg.Logger.Info("MCP server session restarted", "server", b.cfg.Name, "session", s.index)
			} else {
				b.cfg.Metrics.SessionUp(b.cfg.Name, false)
			}
			err := cs.Wait()
			s.mu.Lock()
			pgid := 0
			if s.cs == cs {
				s.cs, pgid, s.pgid = nil, s.pgid, 0
			}
			tail := s.stderr.String()
			s.mu.Unlock()
			_ = cs.Close()  // releases what the session still holds (its subscriptions' listen)
			killGroup(pgid) // what the dead server left running
			b.cfg.Metrics.SessionDown(b.cfg.Name)
			if life.Err() != nil {
				return
			}
			b.cfg.Logger.Warn("MCP server session ended; restarting it", "server", b.cfg.Name, "session", s.index,
				"err", b.redactErr(err), "stderr", b.redact(tail))
		}
		bo := backoff.NewExponentialBackOff(backoff.WithInitialInterval(b.cfg.RestartMin), backoff.WithMaxInterval(b.cfg.RestartMax),
			backoff.WithMaxElapsedTime(0))
		err := backoff.Retry(func() error {
			ctx, cancel := context.WithTimeout(life, b.cfg.StartTimeout)
			defer cancel()
			err := s.connect(ctx)
			if err != nil && life.Err() == nil {
				b.cfg.Logger.Warn("MCP server session failed to start; trying again", "server", b.cfg.Name, "session", s.index, "err", b.redactErr(err))
			}
			return err
		}, backoff.WithContext(bo, life))
		if err != nil || life.Err() != nil {
			s.close()
			return
		}
		restart = true
	}
}

// transportOr is base, or http.DefaultTransport when nil.
func transportOr(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		return http.DefaultTransport
	}
	return base
}

// headerTransport adds the configured headers to every request, and hands
// a rate limit (429) of a call's request to the call (see rateLimit).
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.header) > 0 {
		req = req.Clone(req.Context())
		for k, vs := range t.header {
			req.Header[k] = append([]string(nil), vs...)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		if rl, ok := req.Context().Value(rateLimitKey{}).(*rateLimit); ok {
			rl.set(classify.NewHTTPError(resp))
		}
	}
	return resp, err
}

type rateLimitKey struct{}

// rateLimit keeps the 429 answer a call's request got: the SDK reports it
// only as text, and the pool needs its Retry-After (the delay of the
// retry, and pause_on_rate_limit_above).
type rateLimit struct {
	mu  sync.Mutex
	err *classify.HTTPError
}

func (r *rateLimit) set(e *classify.HTTPError) {
	r.mu.Lock()
	r.err = e
	r.mu.Unlock()
}

func (r *rateLimit) get() *classify.HTTPError {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

// String is the tail, trimmed; "" for a nil writer.
func (w *tailWriter) String() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.TrimSpace(strings.ToValidUTF8(string(w.buf), "\uFFFD"))
}

// nextToken is a progress token unique in the Backend.
func (b *Backend) nextToken() string {
	return "toolpool-" + strconv.FormatUint(b.tokens.Add(1), 10)
}

// onProgress relays a progress notification to the call that sent its
// token.
func (b *Backend) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req == nil || req.Params == nil {
		return
	}
	token, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	if f, ok := b.progress.Load(token); ok {
		f.(func(tools.Progress))(tools.Progress{Progress: req.Params.Progress, Total: req.Params.Total, Message: req.Params.Message})
	}
}
