package toolpool

import (
	"context"
	"errors"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/jetstream"
)

// EmbeddedConfig configures an Embedded server: its listen address (by
// default loopback, port 4222; "127.0.0.1:-1" for a random port), data
// directory, limits and logger. See embedded.Options.
type EmbeddedConfig = embedded.Options

// Embedded is a NATS server with JetStream running in this process: the
// pool on one machine, or in a test, with nothing to install. Create it
// with NewEmbedded, then Start and Stop it.
type Embedded struct {
	cfg     EmbeddedConfig
	mu      sync.Mutex
	srv     *embedded.Server
	once    sync.Once
	stopped chan struct{}
}

// NewEmbedded returns an Embedded server for cfg, with defaults applied.
// Start starts it.
func NewEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	return &Embedded{cfg: cfg.WithDefaults(), stopped: make(chan struct{})}, nil
}

// Start starts the server and returns once it accepts clients. Its store
// lives under DataDir, locked against a second server (see
// embedded.Start); a taken address or data directory is an error
// saying so.
func (e *Embedded) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv != nil {
		return errors.New("toolpool: embedded server: already started")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	srv, err := embedded.Start(e.cfg)
	if err != nil {
		return err
	}
	e.srv = srv
	return nil
}

// Stop shuts the server down: it closes its clients, flushes and closes
// its stores and releases the data directory. There is nothing to drain;
// ctx is not consulted. It is idempotent.
func (e *Embedded) Stop(context.Context) error {
	e.once.Do(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.srv != nil {
			e.srv.Shutdown()
		}
		close(e.stopped)
	})
	return nil
}

// Stopped is closed once Stop has returned.
func (e *Embedded) Stopped() <-chan struct{} { return e.stopped }

// URL is the URL clients in this or other processes connect to; empty
// before Start.
func (e *Embedded) URL() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv == nil {
		return ""
	}
	return e.srv.ClientURL()
}

// Server is the running embedded.Server (nil before Start), for what
// this type does not cover.
func (e *Embedded) Server() *embedded.Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.srv
}

// Connect opens a connection to the server, named name in the server's
// view, with the credentials of the config; the caller closes it. It
// reconnects forever, as every toolpool connection does (jetstream.Connect).
func (e *Embedded) Connect(name string) (*nats.Conn, error) {
	url := e.URL()
	if url == "" {
		return nil, errors.New("toolpool: embedded server: not started")
	}
	return Connect(ConnectOptions{URL: url, User: e.cfg.User, Password: e.cfg.Password, Name: name, Logger: e.cfg.Logger})
}

// ConnectOptions configure Connect: server URLs, credentials, TLS,
// reconnection. See jetstream.ConnectOptions; ConnectOptionsFromEnv reads
// them from the environment (NATS_URL, NATS_CREDS, …).
type ConnectOptions = jetstream.ConnectOptions

// Connect connects to a NATS server or cluster, reconnecting forever after
// outages; the caller closes (or drains) the connection.
func Connect(o ConnectOptions) (*nats.Conn, error) { return jetstream.Connect(o) }
