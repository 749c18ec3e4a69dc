package httpapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/infra/startstop"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
)

// Defaults of ServerConfig.
const (
	// ReadHeaderTimeoutDefault bounds the reading of a request's headers.
	ReadHeaderTimeoutDefault = 10 * time.Second
	// ReadTimeoutDefault bounds the reading of a request's body, from the
	// end of its headers: a body trickled in slowly is cut off.
	ReadTimeoutDefault = 30 * time.Second
	// IdleTimeoutDefault closes a kept-alive connection idle that long.
	IdleTimeoutDefault = 2 * time.Minute
	// MaxHeaderBytesDefault caps a request's headers.
	MaxHeaderBytesDefault = 32 << 10
	// MaxConnsDefault is the most ServerConfig.MaxConns is by default:
	// the default is three quarters of the process's open-file limit, less
	// ProbeConns, at most this (DefaultMaxConns).
	MaxConnsDefault = 4096
	// MaxRequestsDefault caps the requests served at once, health probes
	// not counted; more are answered 503 with Retry-After at once.
	MaxRequestsDefault = 1024
)

// ServerConfig configures a Server: the orchestrator's HTTP server, with
// the checks every request passes before its handler runs.
type ServerConfig struct {
	// Addr is the address Start listens on (host:port). Required by Start;
	// Serve takes a listener instead.
	Addr string
	// Handler serves the requests that pass. Required.
	Handler http.Handler
	// Loopback says the server listens on loopback addresses only. Its
	// Host header must then be a loopback name or address (localhost,
	// 127.0.0.1, [::1], any port) or one of AllowedHosts: a page of
	// another site whose name was made to point at 127.0.0.1 (DNS
	// rebinding) is refused. On other addresses the Host is checked only
	// when AllowedHosts is set: API keys guard them.
	Loopback bool
	// AllowedHosts are further Host names the server answers to (with or
	// without a port; without one, any port).
	AllowedHosts []string
	// AllowedOrigins are the browser origins ("https://app.example.com")
	// whose pages may call the server. A request with any other Origin
	// header (but the server's own), or with Sec-Fetch-Site: cross-site
	// and no allowed Origin, is refused with 403: a web page a developer
	// visits cannot run tools through a local orchestrator. Allowed
	// origins get CORS headers and preflight answers.
	AllowedOrigins []string
	// Keys, when it holds keys and the server is not Loopback, makes
	// GET /metrics need a key with Metrics set. Health probes never need
	// one. The API (Handler) checks keys itself.
	Keys *apikey.Set
	// OpenPaths are served whatever the load and during a drain, without a
	// key: the health probes. Default /healthz and /readyz.
	OpenPaths []string
	// ReadHeaderTimeout bounds the reading of the headers. Default
	// ReadHeaderTimeoutDefault.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the reading of the body. Default
	// ReadTimeoutDefault.
	ReadTimeout time.Duration
	// WriteTimeout bounds the writing of an answer, after ReadTimeout (so
	// a body that came too late still gets its 408); a tool call answer
	// gets its wait for results on top (Handler). Default
	// WriteTimeoutDefault.
	WriteTimeout time.Duration
	// IdleTimeout closes idle kept-alive connections. Default
	// IdleTimeoutDefault.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps the headers. Default MaxHeaderBytesDefault.
	MaxHeaderBytes int
	// MaxConns caps the open connections, ProbeConns not counted.
	// Default DefaultMaxConns(): what fits the open-file limit.
	MaxConns int
	// MaxBodyBytes caps a request body for every path: a request whose
	// Content-Length is over it is answered 413 with Connection: close
	// before its body is read (a client that sent Expect: 100-continue
	// sends none). The handlers cap the bodies they read themselves.
	// Default MaxBodyBytesDefault.
	MaxBodyBytes int64
	// MaxRequests caps the requests served at once, OpenPaths not
	// counted. Default MaxRequestsDefault.
	MaxRequests int
	// RetryAfter is sent with 503 answers (busy, draining). Default
	// RetryAfterDefault.
	RetryAfter time.Duration
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
	// Metrics counts refusals. Default NopMetrics.
	Metrics Metrics

	// probeReadWindow replaces probeReadWindow when set (this package's
	// tests, to see a silent probe connection given back sooner).
	probeReadWindow time.Duration
}

// WithDefaults returns c with zero fields set to their defaults.
func (c ServerConfig) WithDefaults() ServerConfig {
	if c.OpenPaths == nil {
		c.OpenPaths = []string{"/healthz", "/readyz"}
	}
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, ReadHeaderTimeoutDefault)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, ReadTimeoutDefault)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, WriteTimeoutDefault)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, IdleTimeoutDefault)
	c.MaxHeaderBytes = cmp.Or(c.MaxHeaderBytes, MaxHeaderBytesDefault)
	if c.MaxConns == 0 {
		c.MaxConns, _ = DefaultMaxConns()
	}
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, MaxBodyBytesDefault)
	c.MaxRequests = cmp.Or(c.MaxRequests, MaxRequestsDefault)
	c.RetryAfter = cmp.Or(c.RetryAfter, RetryAfterDefault)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = NopMetrics{}
	}
	return c
}

// Validate names the first bad field. It expects defaults to be applied.
func (c ServerConfig) Validate() error {
	switch {
	case c.Handler == nil:
		return errors.New("httpapi: ServerConfig.Handler is required")
	case c.ReadHeaderTimeout <= 0, c.ReadTimeout <= 0, c.WriteTimeout <= 0, c.IdleTimeout <= 0:
		return errors.New("httpapi: ServerConfig timeouts must be positive")
	case c.MaxHeaderBytes <= 0:
		return fmt.Errorf("httpapi: ServerConfig.MaxHeaderBytes must be positive, got %d", c.MaxHeaderBytes)
	case c.MaxConns <= 0:
		return fmt.Errorf("httpapi: ServerConfig.MaxConns must be positive, got %d", c.MaxConns)
	case c.MaxBodyBytes <= 0:
		return fmt.Errorf("httpapi: ServerConfig.MaxBodyBytes must be positive, got %d", c.MaxBodyBytes)
	case c.MaxRequests <= 0:
		return fmt.Errorf("httpapi: ServerConfig.MaxRequests must be positive, got %d", c.MaxRequests)
	case c.RetryAfter <= 0:
		return fmt.Errorf("httpapi: ServerConfig.RetryAfter must be positive, got %v", c.RetryAfter)
	}
	for _, o := range c.AllowedOrigins {
		if _, err := normalOrigin(o); err != nil {
			return fmt.Errorf("httpapi: ServerConfig.AllowedOrigins: %w", err)
		}
	}
	for _, h := range c.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/ ") {
			return fmt.Errorf("httpapi: ServerConfig.AllowedHosts: %q is not a host name", h)
		}
	}
	return nil
}

// Server is the orchestrator's HTTP server. Start listens on
// ServerConfig.Addr (or Serve takes a listener); Stop drains it.
type Server struct {
	startstop.Base
	cfg     ServerConfig
	addr    atomic.Pointer[string]
	srv     *http.Server
	origins map[string]bool
	hosts   map[string]bool // lower case, with or without a port

	active   atomic.Int64 // requests being served, OpenPaths not counted
	draining atomic.Bool
	mu       sync.Mutex
	idle     chan struct{} // closed when draining and active reaches 0
	// detach cancels the requests' base context with dispatch.ErrDetached
	// when the drain runs out: their calls are left to run in the pool.
	detach context.CancelCauseFunc
}

// NewServer returns a Server for cfg, with defaults applied.
func NewServer(cfg ServerConfig) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, origins: map[string]bool{}, hosts: map[string]bool{}, idle: make(chan struct{})}
	for _, o := range cfg.AllowedOrigins {
		n, _ := normalOrigin(o)
		s.origins[n] = true
	}
	for _, h := range cfg.AllowedHosts {
		s.hosts[strings.ToLower(strings.TrimSuffix(h, "."))] = true
	}
	base, detach := context.WithCancelCause(context.Background())
	s.detach = detach
	s.srv = &http.Server{
		BaseContext:       func(net.Listener) context.Context { return base },
		Handler:           s.gate(cfg.Handler),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ConnContext:       connContext,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		// No ReadTimeout or WriteTimeout for the whole server: a tool call
		// answer may take as long as the calls' timeout. The gate sets
		// per-request deadlines instead, and every write to a connection
		// must end within WriteTimeout (limitConn).
	}
	return s, nil
}

// Start listens on ServerConfig.Addr and serves in the background until
// Stop. It returns once the address is bound (or with the error binding
// it); Addr then reports the address bound. A server is started once,
// by Start or Serve.
func (s *Server) Start(ctx context.Context) error {
	if s.cfg.Addr == "" {
		return errors.New("httpapi: ServerConfig.Addr is required to Start (or call Serve with a listener)")
	}
	return s.Base.Start(ctx, func(context.Context) error {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
		if err != nil {
			return fmt.Errorf("http: listen on %s: %w", s.cfg.Addr, err)
		}
		s.setAddr(ln)
		s.Go(func(context.Context) {
			if err := s.serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.cfg.Logger.Error("http server failed", "err", err)
			}
		})
		return nil
	})
}

// Addr is the address the server listens on: empty before Start or Serve.
func (s *Server) Addr() string {
	if a := s.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// Serve accepts connections on ln, at most MaxConns at once, until Stop;
// it returns http.ErrServerClosed then, and at once after Stop. It is the
// server's start: after Start or another Serve it returns
// startstop.ErrStarted. ln is closed when it returns.
func (s *Server) Serve(ln net.Listener) error {
	err := s.Base.Start(context.Background(), func(context.Context) error { return nil })
	if err != nil {
		_ = ln.Close()
		if errors.Is(err, startstop.ErrStopped) {
			return http.ErrServerClosed
		}
		return err
	}
	s.setAddr(ln)
	return s.serve(ln)
}

func (s *Server) setAddr(ln net.Listener) {
	a := ln.Addr().String()
	s.addr.Store(&a)
}

// serve serves ln until Stop.
func (s *Server) serve(ln net.Listener) error {
	s.logLimits()
	return s.srv.Serve(&limitListener{Listener: ln, slots: make(chan struct{}, s.cfg.MaxConns),
		probes: make(chan struct{}, ProbeConns), metrics: s.cfg.Metrics, stall: s.cfg.WriteTimeout,
		probeWindow: cmp.Or(s.cfg.probeReadWindow, probeReadWindow)})
}

// Ready is a readiness check (package health's Check.Func): an error once
// the server drains.
func (s *Server) Ready(context.Context) error {
	if s.draining.Load() {
		return errors.New("shutting down: draining the HTTP requests in flight")
	}
	return nil
}

// Stop drains the server: from now on readiness fails and new requests
// but OpenPaths get 503 with Retry-After; the requests in flight finish
// (until ctx is done); then the listener and the connections are closed,
// which cancels the requests left. The handlers' dependencies (the
// dispatcher) must run until it returns. It returns nil when every request
// finished in time. Stopped is closed once it has returned.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.draining.CompareAndSwap(false, true) && s.active.Load() == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
	return s.Base.Stop(ctx, nil, s.drain)
}

// drain waits for the requests in flight until ctx is done, then shuts
// the server down, closing the connections left.
func (s *Server) drain(ctx context.Context) error {
	var err error
	select {
	case <-s.idle:
	case <-ctx.Done():
		err = context.Cause(ctx)
		// Before the connections close: the requests left end with this
		// cause, and their calls are not cancelled pool-wide.
		s.detach(dispatch.ErrDetached)
	}
	defer s.detach(nil)
	if cerr := s.srv.Shutdown(ctx); cerr != nil {
		_ = s.srv.Close() // the requests left are cancelled
		err = cmp.Or(err, cerr)
	}
	return err
}

// done ends a counted request.
func (s *Server) done() {
	if s.active.Add(-1) == 0 && s.draining.Load() {
		s.mu.Lock()
		select {
		case <-s.idle:
		default:
			if s.active.Load() == 0 {
				close(s.idle)
			}
		}
		s.mu.Unlock()
	}
}

// gate runs the checks every request passes.
// The request headers a page of an allowed origin may send, and the
// answer's headers it may read: those of the HTTP API (async calls'
// Prefer, DELETE and Location included) and of /mcp.
const (
	corsAllow = "Authorization, Content-Type, Toolpool-Session, Toolpool-Priority, Traceparent, Cache-Control, Pragma, Prefer, " +
		"Mcp-Session-Id, Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID"
	corsExpose = "Toolpool-Format, Toolpool-Error-Indexes, Toolpool-Cache, Traceparent, Retry-After, Location, Preference-Applied, " +
		"Mcp-Session-Id, WWW-Authenticate"
)

func (s *Server) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		now := time.Now()
		_ = rc.SetReadDeadline(now.Add(s.cfg.ReadTimeout))
		// The answer may be written once the body is in, or its 408 once
		// the body's time is up: the write gets its time after the read's.
		_ = rc.SetWriteDeadline(now.Add(s.cfg.ReadTimeout + s.cfg.WriteTimeout))
		if !s.withinLimits(w, r) {
			return
		}

		if !s.hostAllowed(r.Host) {
			s.refuse(w, r, RefusedHost, http.StatusForbidden, ErrorForbidden,
				"this server does not answer to the host name "+strconv.Quote(r.Host)+"; use the address it listens on")
			return
		}
		origin, allowed, err := s.origin(r)
		if err != nil {
			s.refuse(w, r, RefusedOrigin, http.StatusForbidden, ErrorForbidden, err.Error())
			return
		}
		if allowed {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Expose-Headers", corsExpose)
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE")
				h.Set("Access-Control-Allow-Headers", corsAllow)
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		if slices.Contains(s.cfg.OpenPaths, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		if r.URL.Path == "/metrics" && !s.cfg.Loopback && s.cfg.Keys.Len() > 0 {
			k, err := authenticate(s.cfg.Keys, r)
			if err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="toolpool"`)
				s.refuse(w, r, RefusedUnauthorized, http.StatusUnauthorized, ErrorUnauthorized, err.Error())
				return
			}
			if !k.Metrics {
				s.refuse(w, r, RefusedUnauthorized, http.StatusForbidden, ErrorForbidden, "this API key may not read the metrics")
				return
			}
		}
		if s.active.Add(1) > int64(s.cfg.MaxRequests) {
			s.done()
			s.unavailable(w, r, RefusedBusy, "the server is serving as many requests as it may; retry after the Retry-After delay")
			return
		}
		defer s.done()
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
			s.unavailable(w, r, RefusedDraining, "the server is shutting down; retry after the Retry-After delay, on another replica if there is one")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) unavailable(w http.ResponseWriter, r *http.Request, reason, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(s.cfg.RetryAfter.Seconds()))))
	s.refuse(w, r, reason, http.StatusServiceUnavailable, ErrorUnavailable, msg)
}

func (s *Server) refuse(w http.ResponseWriter, r *http.Request, reason string, status int, typ, msg string) {
	s.cfg.Metrics.Refused(reason)
	s.cfg.Logger.DebugContext(r.Context(), "http request refused", slog.String("reason", reason),
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status))
	(&Handler{log: s.cfg.Logger}).write(w, r, status, ErrorResponse{Error: ErrorDetail{Type: typ, Message: msg}})
}

// hostAllowed checks the Host header.
func (s *Server) hostAllowed(host string) bool {
	if host == "" || (!s.cfg.Loopback && len(s.hosts) == 0) {
		return true
	}
	host = strings.ToLower(host)
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.Trim(name, "[]"), ".")
	if s.hosts[host] || s.hosts[name] {
		return true
	}
	if name == "localhost" {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// origin checks a browser's request: allowed says the Origin is one of
// AllowedOrigins (CORS headers go with the answer); an error refuses it.
func (s *Server) origin(r *http.Request) (origin string, allowed bool, err error) {
	raw := r.Header.Get("Origin")
	if raw != "" {
		n, perr := normalOrigin(raw)
		switch {
		case perr == nil && s.origins[n]:
			return raw, true, nil
		case perr == nil && sameOrigin(n, r.Host):
			return raw, false, nil
		}
		return "", false, fmt.Errorf("requests from the web page of origin %q are refused: a browser sent them, and only origins given with --http-allowed-origins may call this server", raw)
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return "", false, errors.New("a browser's cross-site request is refused; only origins given with --http-allowed-origins may call this server")
	}
	return "", false, nil
}

// normalOrigin returns scheme://host[:port] in lower case.
func normalOrigin(o string) (string, error) {
	u, err := url.Parse(strings.TrimSuffix(o, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", fmt.Errorf("origin %q: want scheme://host[:port], e.g. https://app.example.com", o)
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// sameOrigin reports whether origin is the server itself, as the request
// names it.
func sameOrigin(origin, host string) bool {
	_, rest, _ := strings.Cut(origin, "://")
	return host != "" && rest == strings.ToLower(host)
}

// withinLimits refuses, before the other checks, what the connection or
// the body's size already decides: a request other than a probe's on a
// probe connection (ProbeConns), and a body declared over MaxBodyBytes.
// Both are answered with Connection: close: a probe connection gives its
// slot back at once, and the body of a 413 is never read (no 100 Continue
// is sent for it). ok is false when r was answered.
func (s *Server) withinLimits(w http.ResponseWriter, r *http.Request) (ok bool) {
	if onProbeConn(r) {
		w.Header().Set("Connection", "close")
		if !slices.Contains(s.cfg.OpenPaths, r.URL.Path) {
			s.unavailable(w, r, RefusedConnections, "the server has as many connections open as it may; this one was kept for health probes. Retry after the Retry-After delay")
			return false
		}
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		w.Header().Set("Connection", "close")
		s.refuse(w, r, RefusedTooLarge, http.StatusRequestEntityTooLarge, ErrorTooLarge, tooLargeMessage(s.cfg.MaxBodyBytes))
		return false
	}
	return true
}

// tooLargeMessage is the message of a 413.
func tooLargeMessage(limit int64) string {
	return fmt.Sprintf("the body is over the limit of %d bytes; send the tool calls in smaller batches", limit)
}

// logLimits says what bounds the server's connections, once it serves.
func (s *Server) logLimits() {
	limit, raised := fileLimit()
	s.cfg.Logger.Info("http server limits", slog.Int("max_conns", s.cfg.MaxConns), slog.Int("probe_conns", ProbeConns),
		slog.Uint64("open_file_limit", limit), slog.Bool("file_limit_raised", raised),
		slog.Duration("write_timeout", s.cfg.WriteTimeout), slog.Duration("idle_timeout", s.cfg.IdleTimeout),
		slog.Int64("max_body_bytes", s.cfg.MaxBodyBytes))
	if limit > 0 && uint64(s.cfg.MaxConns+ProbeConns) > limit {
		s.cfg.Logger.Warn("the HTTP connection cap is over the open-file limit: connections past the limit fail to be accepted, and the process cannot open files or reach NATS meanwhile; lower --http-max-conns or raise the limit (ulimit -n, LimitNOFILE)",
			slog.Int("max_conns", s.cfg.MaxConns), slog.Int("probe_conns", ProbeConns), slog.Uint64("open_file_limit", limit))
	}
}
