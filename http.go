package toolpool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/orchhost"
)

// Defaults of HTTPServerConfig.
const (
	// HTTPReadTimeoutDefault is HTTPServerConfig.ReadTimeout.
	HTTPReadTimeoutDefault = httpapi.ReadTimeoutDefault
	// HTTPMaxConnsDefault is the most HTTPServerConfig.MaxConns is by
	// default: three quarters of the open-file limit, less the
	// connections kept for health probes, at most this.
	HTTPMaxConnsDefault = httpapi.MaxConnsDefault
	// HTTPMaxRequestsDefault is HTTPServerConfig.MaxRequests.
	HTTPMaxRequestsDefault = httpapi.MaxRequestsDefault
)

// HTTPServerConfig configures an Orchestrator's HTTP server
// (Orchestrator.NewHTTPServer): the checks every request passes before
// Handler runs. Zero fields take the documented defaults; Validate names
// the field that is wrong.
type HTTPServerConfig struct {
	// Addr is the address Start listens on, host:port (port 0: a free
	// one, see HTTPServer.Addr). Required. On a loopback address the Host
	// header must be a loopback name or one of AllowedHosts (a page whose
	// name was made to point at 127.0.0.1 is refused).
	Addr string
	// AllowedHosts are further Host names the server answers to (with or
	// without a port; without one, any port). On an address that is not
	// loopback the Host is checked only when they are given.
	AllowedHosts []string
	// AllowedOrigins are the browser origins ("https://app.example.com")
	// whose pages may call the server; other cross-origin requests are
	// refused with 403. Allowed origins get CORS headers.
	AllowedOrigins []string
	// ReadTimeout bounds the reading of a request's body. Default
	// HTTPReadTimeoutDefault.
	ReadTimeout time.Duration
	// MaxConns caps the connections open at once; more are closed at
	// once, but for a few kept for the health probes. Default: three
	// quarters of the process's open-file limit, at most
	// HTTPMaxConnsDefault.
	MaxConns int
	// MaxRequests caps the requests served at once (health probes not
	// counted); more get 503 at once. Default HTTPMaxRequestsDefault.
	MaxRequests int
	// InsecureNoAuth serves an Addr that is not loopback although the
	// Orchestrator has no API keys: anyone who reaches it runs tools. Set
	// it only when something in front authenticates; without it
	// NewHTTPServer refuses such a server.
	InsecureNoAuth bool
}

// Loopback reports whether Addr listens on loopback addresses only
// (127.0.0.0/8, ::1, localhost), where no credential is required.
func (c HTTPServerConfig) Loopback() bool { return loopbackAddr(c.Addr) }

// WithDefaults returns c with its zero fields set to their defaults.
func (c HTTPServerConfig) WithDefaults() HTTPServerConfig {
	c.ReadTimeout = cmp.Or(c.ReadTimeout, HTTPReadTimeoutDefault)
	if c.MaxConns == 0 {
		c.MaxConns, _ = httpapi.DefaultMaxConns()
	}
	c.MaxRequests = cmp.Or(c.MaxRequests, HTTPMaxRequestsDefault)
	return c
}

// Validate reports the first field of c that is wrong, by name. It
// expects the defaults applied.
func (c HTTPServerConfig) Validate() error {
	switch {
	case c.Addr == "":
		return fmt.Errorf("toolpool: HTTPServerConfig.Addr is required")
	case c.ReadTimeout <= 0:
		return fmt.Errorf("toolpool: HTTPServerConfig.ReadTimeout must be positive, got %s", c.ReadTimeout)
	case c.MaxConns < 1:
		return fmt.Errorf("toolpool: HTTPServerConfig.MaxConns must be at least 1, got %d", c.MaxConns)
	case c.MaxRequests < 1:
		return fmt.Errorf("toolpool: HTTPServerConfig.MaxRequests must be at least 1, got %d", c.MaxRequests)
	}
	sc := c.serverConfig(nil)
	sc.Handler = http.NotFoundHandler()
	if err := sc.WithDefaults().Validate(); err != nil { // the origins and hosts, named as here
		return errors.New("toolpool: HTTPServerConfig." + strings.TrimPrefix(err.Error(), "httpapi: ServerConfig."))
	}
	return nil
}

// serverConfig is httpapi's configuration for c, with the API keys keys.
func (c HTTPServerConfig) serverConfig(keys *apikey.Set) httpapi.ServerConfig {
	return httpapi.ServerConfig{
		Addr: c.Addr, Loopback: loopbackAddr(c.Addr), AllowedHosts: c.AllowedHosts, AllowedOrigins: c.AllowedOrigins,
		Keys: keys, ReadTimeout: c.ReadTimeout, MaxConns: c.MaxConns, MaxRequests: c.MaxRequests,
	}
}

// loopbackAddr reports whether a listen address is loopback only.
func loopbackAddr(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// HTTPServer serves an Orchestrator's Handler on the network, with the
// checks a server facing it needs: API keys for GET /metrics off
// loopback, the Host header (DNS rebinding), browsers' origins, limits on
// connections, requests and slow bodies, and a drain. Create it with
// Orchestrator.NewHTTPServer; Start it after the Orchestrator, and Stop
// it before (and before the Servers of the process), so that the
// requests in flight get their results.
type HTTPServer struct {
	srv *httpapi.Server
	h   *orchhost.Host
}

// NewHTTPServer returns the HTTP server of the Orchestrator's Handler for
// cfg, with defaults applied; its /readyz fails once the server drains.
func (o *Orchestrator) NewHTTPServer(cfg HTTPServerConfig) (*HTTPServer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	keys := o.h.APIKeys()
	if !cfg.Loopback() && keys.Len() == 0 && !cfg.InsecureNoAuth {
		return nil, fmt.Errorf("toolpool: HTTPServerConfig.Addr %s is not a loopback address and the Orchestrator has no API keys: "+
			"anyone who reaches it could run tools; give OrchestratorConfig.APIKeys, or set HTTPServerConfig.InsecureNoAuth if something in front authenticates", cfg.Addr)
	}
	srv, err := o.h.NewHTTPServer(cfg.serverConfig(keys))
	if err != nil {
		return nil, fmt.Errorf("toolpool: %w", err)
	}
	return &HTTPServer{srv: srv, h: o.h}, nil
}

// Start listens on HTTPServerConfig.Addr and serves in the background
// until Stop. It returns once the address is bound (or with the error
// binding it).
func (s *HTTPServer) Start(ctx context.Context) error { return s.srv.Start(ctx) }

// Addr is the address the server listens on: empty before Start.
func (s *HTTPServer) Addr() string { return s.srv.Addr() }

// Stop drains the server: the MCP sessions' event streams end, readiness
// fails and new requests (but health probes) get 503; the requests in
// flight finish until ctx is done, then the connections are closed. It
// returns nil when every request finished in time.
func (s *HTTPServer) Stop(ctx context.Context) error {
	s.h.MCP().EndStreams() // MCP sessions' GET streams would hold the drain
	return s.srv.Stop(ctx)
}

// Stopped is closed once the server stopped serving.
func (s *HTTPServer) Stopped() <-chan struct{} { return s.srv.Stopped() }
