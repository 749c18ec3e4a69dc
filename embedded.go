package toolpool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/infra/startstop"
	"github.com/toolpool/toolpool/jetstream"
)

// Defaults of EmbeddedConfig.
const (
	// EmbeddedListenDefault is EmbeddedConfig.Listen.
	EmbeddedListenDefault = embedded.ListenDefault
	// EmbeddedDataDirDefault is EmbeddedConfig.DataDir, relative to the
	// working directory.
	EmbeddedDataDirDefault = embedded.DataDirDefault
	// EmbeddedServerNameDefault is EmbeddedConfig.ServerName.
	EmbeddedServerNameDefault = embedded.ServerNameDefault
	// EmbeddedMaxPayloadDefault is EmbeddedConfig.MaxPayload.
	EmbeddedMaxPayloadDefault = embedded.MaxPayloadDefault
	// EmbeddedReadyTimeoutDefault is EmbeddedConfig.ReadyTimeout.
	EmbeddedReadyTimeoutDefault = embedded.ReadyTimeoutDefault
)

// ErrListenAddrInUse is matched (errors.Is) by the error of an Embedded
// server's Start when its listen address is taken, typically by another
// server.
var ErrListenAddrInUse = embedded.ErrListenAddrInUse

// EmbeddedConfig configures an Embedded server. Zero fields take the
// documented defaults (WithDefaults); Validate names the field that is
// wrong.
type EmbeddedConfig struct {
	// Listen is the client address, host:port. Port 0 or -1 picks a free
	// port (see Embedded.URL); an empty host listens on all interfaces.
	// Default EmbeddedListenDefault.
	Listen string
	// DataDir holds the server's state: JetStream's store in
	// DataDir/jetstream, locked against a second server while this one
	// runs. Default EmbeddedDataDirDefault.
	DataDir string
	// ServerName names the server in logs and monitoring. Default
	// EmbeddedServerNameDefault.
	ServerName string
	// User and Password, when User is set, are required of every client
	// (Embedded.Connect gives them). Set them when Listen is not a
	// loopback address.
	User, Password string
	// MaxPayload is the largest message the server accepts, in bytes: at
	// least StreamsConfig.MaxMsgSize plus headers. Default
	// EmbeddedMaxPayloadDefault.
	MaxPayload int32
	// MaxStore, when positive, caps JetStream's file store in bytes;
	// writes past it fail. Default: the server's own limit (most of the
	// free disk space).
	MaxStore int64
	// ReadyTimeout bounds the wait for the server to accept clients.
	// Default EmbeddedReadyTimeoutDefault.
	ReadyTimeout time.Duration
	// Logger receives the server's log: warnings and errors at their
	// levels, notices at debug level. Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c EmbeddedConfig) WithDefaults() EmbeddedConfig {
	c.Listen = cmp.Or(c.Listen, EmbeddedListenDefault)
	c.DataDir = cmp.Or(c.DataDir, EmbeddedDataDirDefault)
	c.ServerName = cmp.Or(c.ServerName, EmbeddedServerNameDefault)
	c.MaxPayload = cmp.Or(c.MaxPayload, EmbeddedMaxPayloadDefault)
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, EmbeddedReadyTimeoutDefault)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate reports the first field of c that is wrong, by name.
func (c EmbeddedConfig) Validate() error {
	switch {
	case c.MaxPayload < 0:
		return fmt.Errorf("toolpool: EmbeddedConfig.MaxPayload must be positive, got %d", c.MaxPayload)
	case c.MaxStore < 0:
		return fmt.Errorf("toolpool: EmbeddedConfig.MaxStore must not be negative, got %d", c.MaxStore)
	case c.ReadyTimeout < 0:
		return fmt.Errorf("toolpool: EmbeddedConfig.ReadyTimeout must be positive, got %s", c.ReadyTimeout)
	case c.Password != "" && c.User == "":
		return errors.New("toolpool: EmbeddedConfig.Password needs a User")
	}
	return nil
}

// Embedded is a NATS server with JetStream running in this process: the
// pool on one machine, or in a test, with nothing to install. Create it
// with NewEmbedded, then Start and Stop it.
type Embedded struct {
	life startstop.Base
	cfg  EmbeddedConfig
	srv  atomic.Pointer[embedded.Server] // once started
}

// NewEmbedded returns an Embedded server for cfg, with defaults applied.
// Start starts it.
func NewEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Embedded{cfg: cfg}, nil
}

// Start starts the server and returns once it accepts clients. Its store
// lives under DataDir, locked against a second server; a taken address
// (ErrListenAddrInUse) or data directory is an error saying so.
func (e *Embedded) Start(ctx context.Context) error {
	err := e.life.Start(ctx, func(context.Context) error {
		srv, err := embedded.Start(embedded.Options{
			Listen: e.cfg.Listen, DataDir: e.cfg.DataDir, ServerName: e.cfg.ServerName, Logger: e.cfg.Logger,
			User: e.cfg.User, Password: e.cfg.Password, MaxPayload: e.cfg.MaxPayload, ReadyTimeout: e.cfg.ReadyTimeout,
			MaxStore: e.cfg.MaxStore,
		})
		if err != nil {
			return err
		}
		e.srv.Store(srv)
		return nil
	})
	if errors.Is(err, startstop.ErrStarted) || errors.Is(err, startstop.ErrStopped) {
		return fmt.Errorf("toolpool: embedded server: %w", err)
	}
	return err
}

// Stop shuts the server down: it closes its clients, flushes and closes
// its stores and releases the data directory. There is nothing to drain;
// ctx is not consulted. It is idempotent.
func (e *Embedded) Stop(ctx context.Context) error {
	return e.life.Stop(ctx, nil, func(context.Context) error {
		e.srv.Load().Shutdown()
		return nil
	})
}

// Stopped is closed once Stop has returned.
func (e *Embedded) Stopped() <-chan struct{} { return e.life.Stopped() }

// URL is the URL clients in this or other processes connect to; empty
// before Start.
func (e *Embedded) URL() string {
	if srv := e.srv.Load(); srv != nil {
		return srv.ClientURL()
	}
	return ""
}

// Connect opens a connection to the server, named name in the server's
// view, with the credentials of the config; the caller closes it. It
// reconnects forever, as every toolpool connection does (Connect).
func (e *Embedded) Connect(name string) (*nats.Conn, error) {
	url := e.URL()
	if url == "" {
		return nil, errors.New("toolpool: embedded server: not started")
	}
	return Connect(ConnectOptions{URL: url, User: e.cfg.User, Password: e.cfg.Password, Name: name, Logger: e.cfg.Logger})
}

// ConnectOptions configure Connect: server URLs, credentials, TLS,
// reconnection. ConnectOptionsFromEnv reads them from the environment
// (NATS_URL, NATS_CREDS, …).
type ConnectOptions = jetstream.ConnectOptions

// ConnectOptionsFromEnv returns the ConnectOptions the environment gives:
// NATS_URL, NATS_CREDS, NATS_USER and NATS_PASSWORD, NATS_NKEY, NATS_CA,
// NATS_CERT and NATS_KEY.
func ConnectOptionsFromEnv() ConnectOptions { return jetstream.ConnectOptionsFromEnv() }

// Connect connects to a NATS server or cluster, reconnecting forever after
// outages; the caller closes (or drains) the connection.
func Connect(o ConnectOptions) (*nats.Conn, error) { return jetstream.Connect(o) }
