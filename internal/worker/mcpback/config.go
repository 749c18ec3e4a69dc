package mcpback

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/toolpool/toolpool/pkg/tools"
)

// Defaults of Config.
const (
	// SessionsDefault is Config.Sessions: one connection to the server.
	SessionsDefault = 1
	// SessionsMax bounds Config.Sessions.
	SessionsMax = 64
	// StartTimeoutDefault bounds the connection of a session and the
	// listing of the tools when Start's ctx has no deadline.
	StartTimeoutDefault = 30 * time.Second
	// RestartMinDefault is the first delay before a session that died is
	// connected again; it doubles up to RestartMaxDefault.
	RestartMinDefault = 100 * time.Millisecond
	// RestartMaxDefault caps the delay between restarts.
	RestartMaxDefault = 10 * time.Second
	// TerminateGraceDefault is how long a stdio server has to exit once its
	// stdin is closed, before it is sent SIGTERM.
	TerminateGraceDefault = 2 * time.Second
)

// Config configures a Backend. Exactly one of Command and URL is set.
type Config struct {
	// Name names the server in logs, metrics and readiness (the catalog
	// entry's name). Required.
	Name string
	// Command is the argv of a stdio server (no shell); Command[0] should
	// be an absolute path.
	Command []string
	// Env is the stdio server's whole environment, as NAME=value.
	Env []string
	// Dir is the stdio server's working directory; empty means the
	// worker's.
	Dir string
	// URL is the endpoint of a streamable-HTTP server.
	URL string
	// Header is sent with every request to URL.
	Header http.Header
	// HTTPClient sends the requests to URL. Default http.DefaultClient
	// (with Header added).
	HTTPClient *http.Client
	// Secrets are values (resolved ${ENV} references) that must never
	// appear in a log or a message: they are redacted from errors.
	Secrets []string
	// Tools are the names (as the server names them) of the server's tools
	// to serve. Default: all of them.
	Tools []string
	// Prefix is put before each tool's name in the pool. Names the pool
	// does not accept (tools.NamePattern) have their other characters
	// replaced by '_'.
	Prefix string
	// Sessions is how many connections (stdio: processes) the Backend
	// keeps, so that slow calls do not wait for each other. Default
	// SessionsDefault.
	Sessions int
	// Template holds the settings every tool of the server gets: Timeout,
	// Retry, Concurrency, PauseOn429Above, Idempotent, Hints (over the
	// server's), Fairness, PerKey, Cost, Cache (only for a tool that is
	// idempotent or read-only: tools.Cacheable) and Approval. Its Name,
	// Description, InputSchema and Handler are ignored.
	Template tools.Tool
	// Idempotent, when set, is every tool's idempotency; otherwise a tool
	// is idempotent when the server's annotations say it is read-only or
	// idempotent, or when Template.Idempotent is true.
	Idempotent *bool
	// StartTimeout bounds Start when its ctx has no deadline. Default
	// StartTimeoutDefault.
	StartTimeout time.Duration
	// RestartMin and RestartMax bound the backoff between restarts of a
	// session that died. Defaults RestartMinDefault, RestartMaxDefault.
	RestartMin, RestartMax time.Duration
	// TerminateGrace is how long a stdio server has to exit on Stop before
	// SIGTERM. Default TerminateGraceDefault.
	TerminateGrace time.Duration
	// OnChange, when set, is called (from a goroutine of the Backend) with
	// every tool the Backend serves now, once the server's tool list
	// changed (list_changed) or once a Set's server that failed at start
	// came up: the tools it added are among them, with the new
	// descriptions and schemas of the others; the tools it served before
	// and ts lacks are the ones the server removed. To register, serve,
	// announce and withdraw them: toolpool.Server.Serve and Unserve.
	OnChange func(ts []tools.Tool)
	// Metrics counts starts, failures and restarts. Default: none.
	Metrics Metrics
	// Logger receives the Backend's logs. Default slog.Default().
	Logger *slog.Logger
}

// Metrics is what a Backend reports; pkg/metrics implements it.
type Metrics interface {
	// SessionUp is a session of server that connected; restart is true
	// when it replaced one that died.
	SessionUp(server string, restart bool)
	// SessionDown is a session of server, counted up before, that ended.
	SessionDown(server string)
	// StartFailed is a server whose Start failed.
	StartFailed(server string)
}

type nopMetrics struct{}

func (nopMetrics) SessionUp(string, bool) {}
func (nopMetrics) SessionDown(string)     {}
func (nopMetrics) StartFailed(string)     {}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Sessions = cmp.Or(c.Sessions, SessionsDefault)
	c.StartTimeout = cmp.Or(c.StartTimeout, StartTimeoutDefault)
	c.RestartMin = cmp.Or(c.RestartMin, RestartMinDefault)
	c.RestartMax = cmp.Or(c.RestartMax, RestartMaxDefault)
	c.TerminateGrace = cmp.Or(c.TerminateGrace, TerminateGraceDefault)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Metrics == nil {
		c.Metrics = nopMetrics{}
	}
	return c
}

// Validate names the first field of c that is wrong.
func (c Config) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("mcpback: Config.Name is required")
	case len(c.Command) == 0 && c.URL == "":
		return errors.New("mcpback: Config.Command or Config.URL is required")
	case len(c.Command) > 0 && c.URL != "":
		return errors.New("mcpback: Config.Command and Config.URL exclude each other")
	case c.Sessions < 1 || c.Sessions > SessionsMax:
		return fmt.Errorf("mcpback: Config.Sessions must be between 1 and %d, got %d", SessionsMax, c.Sessions)
	case c.RestartMax < c.RestartMin:
		return fmt.Errorf("mcpback: Config.RestartMax (%s) must be at least Config.RestartMin (%s)", c.RestartMax, c.RestartMin)
	case c.StartTimeout < 0 || c.RestartMin < 0 || c.TerminateGrace < 0:
		return errors.New("mcpback: Config.StartTimeout, RestartMin and TerminateGrace must not be negative")
	}
	return nil
}
