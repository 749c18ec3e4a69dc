package jetstream

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Environment variables read by ConnectOptionsFromEnv.
const (
	EnvURL      = "NATS_URL"      // server URL(s), comma-separated
	EnvCreds    = "NATS_CREDS"    // path of a .creds file (JWT and nkey seed)
	EnvUser     = "NATS_USER"     // user name
	EnvPassword = "NATS_PASSWORD" // password of NATS_USER
	EnvNKey     = "NATS_NKEY"     // path of a file holding an nkey seed
	EnvCA       = "NATS_CA"       // path of the CA certificate(s) to verify the server
	EnvCert     = "NATS_CERT"     // path of the client certificate
	EnvKey      = "NATS_KEY"      // path of the client certificate's key
)

// Defaults of ConnectOptions.
const (
	ConnectNameDefault      = "toolpool"
	ConnectTimeoutDefault   = 5 * time.Second
	ReconnectWaitDefault    = 2 * time.Second
	ReconnectJitterDefault  = time.Second
	ReconnectBufSizeDefault = 8 << 20 // 8 MiB
)

// ConnectOptions says how to reach the NATS server. Credentials are
// alternatives: set at most one of Creds, NKeyFile and User/Password.
type ConnectOptions struct {
	// URL is the server URL, or several separated by commas.
	// Default nats.DefaultURL (nats://127.0.0.1:4222).
	URL string
	// Creds is the path of a .creds file (decentralised JWT auth).
	Creds string
	// User and Password authenticate with a user name and password.
	User, Password string
	// NKeyFile is the path of a file holding a user nkey seed.
	NKeyFile string
	// CAFile is the path of the PEM CA certificate(s) that verify the
	// server's TLS certificate; setting it requires TLS.
	CAFile string
	// CertFile and KeyFile are the PEM client certificate and key for
	// mutual TLS; set both or neither.
	CertFile, KeyFile string
	// Name is the connection name the server shows in its monitoring.
	// Default ConnectNameDefault ("toolpool").
	Name string
	// Logger receives disconnect, reconnect, close and asynchronous error
	// events. Default slog.Default().
	Logger *slog.Logger
	// Timeout bounds the initial dial and handshake of each server.
	// Default ConnectTimeoutDefault (5s).
	Timeout time.Duration
	// ReconnectWait is the pause between reconnect attempts to one server;
	// reconnects never give up. Default ReconnectWaitDefault (2s).
	ReconnectWait time.Duration
	// ReconnectJitter is the random time, up to this, added to
	// ReconnectWait so a fleet does not reconnect in lockstep.
	// Default ReconnectJitterDefault (1s).
	ReconnectJitter time.Duration
	// ReconnectBufSize is how many bytes of publishes are buffered while
	// disconnected; -1 disables buffering (publishes then fail at once).
	// Default ReconnectBufSizeDefault (8 MiB).
	ReconnectBufSize int
}

// ConnectOptionsFromEnv returns options from NATS_URL, NATS_CREDS,
// NATS_USER, NATS_PASSWORD, NATS_NKEY, NATS_CA, NATS_CERT and NATS_KEY.
// Unset variables leave their fields empty.
func ConnectOptionsFromEnv() ConnectOptions {
	return ConnectOptions{
		URL:      os.Getenv(EnvURL),
		Creds:    os.Getenv(EnvCreds),
		User:     os.Getenv(EnvUser),
		Password: os.Getenv(EnvPassword),
		NKeyFile: os.Getenv(EnvNKey),
		CAFile:   os.Getenv(EnvCA),
		CertFile: os.Getenv(EnvCert),
		KeyFile:  os.Getenv(EnvKey),
	}
}

// WithDefaults returns o with zero fields set to their defaults.
func (o ConnectOptions) WithDefaults() ConnectOptions {
	if o.URL == "" {
		o.URL = nats.DefaultURL
	}
	if o.Name == "" {
		o.Name = ConnectNameDefault
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Timeout == 0 {
		o.Timeout = ConnectTimeoutDefault
	}
	if o.ReconnectWait == 0 {
		o.ReconnectWait = ReconnectWaitDefault
	}
	if o.ReconnectJitter == 0 {
		o.ReconnectJitter = ReconnectJitterDefault
	}
	if o.ReconnectBufSize == 0 {
		o.ReconnectBufSize = ReconnectBufSizeDefault
	}
	return o
}

// Validate reports contradictory or unreadable settings of o, naming them.
// It checks that the files it names exist; it does not print secrets.
func (o ConnectOptions) Validate() error {
	methods := 0
	for _, set := range []bool{o.Creds != "", o.NKeyFile != "", o.User != ""} {
		if set {
			methods++
		}
	}
	switch {
	case methods > 1:
		return errors.New("jetstream: nats credentials: set only one of creds file (NATS_CREDS), nkey file (NATS_NKEY) and user (NATS_USER)")
	case o.Password != "" && o.User == "":
		return errors.New("jetstream: nats credentials: a password (NATS_PASSWORD) is set without a user (NATS_USER)")
	case (o.CertFile == "") != (o.KeyFile == ""):
		return errors.New("jetstream: nats TLS: set both the client certificate (NATS_CERT) and its key (NATS_KEY), or neither")
	case o.Timeout < 0 || o.ReconnectWait < 0 || o.ReconnectJitter < 0:
		return errors.New("jetstream: nats connect: Timeout, ReconnectWait and ReconnectJitter must not be negative")
	}
	for _, f := range []struct{ what, path string }{
		{"creds file", o.Creds},
		{"nkey seed file", o.NKeyFile},
		{"CA file", o.CAFile},
		{"client certificate", o.CertFile},
		{"client key", o.KeyFile},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("jetstream: nats %s: %w", f.what, err)
		}
	}
	return nil
}

// Connect connects to NATS with options suited to a long-running process:
// a connection name, reconnects that never give up with a jittered wait, a
// reconnect buffer, pings that notice a dead server within a minute, and
// connection events logged to opts.Logger. Zero fields of opts take their
// defaults. The first connect does not retry: an unreachable server or
// rejected credentials give an error at once, naming the URL with any
// password in it redacted.
func Connect(opts ConnectOptions) (*nats.Conn, error) {
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	nopts := []nats.Option{
		nats.Name(opts.Name),
		nats.Timeout(opts.Timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(opts.ReconnectWait),
		nats.ReconnectJitter(opts.ReconnectJitter, opts.ReconnectJitter),
		nats.ReconnectBufSize(opts.ReconnectBufSize),
		nats.PingInterval(20 * time.Second),
		nats.MaxPingsOutstanding(3),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats: disconnected, reconnecting", slog.String("url", nc.ConnectedUrlRedacted()), slog.Any("err", err))
				return
			}
			log.Info("nats: disconnected", slog.String("url", nc.ConnectedUrlRedacted()))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats: reconnected", slog.String("url", nc.ConnectedUrlRedacted()))
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); err != nil {
				log.Warn("nats: connection closed", slog.Any("err", err))
				return
			}
			log.Debug("nats: connection closed")
		}),
		nats.LameDuckModeHandler(func(nc *nats.Conn) {
			log.Warn("nats: server is shutting down (lame duck mode); will reconnect to another", slog.String("url", nc.ConnectedUrlRedacted()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			attrs := []any{slog.Any("err", err)}
			if sub != nil {
				attrs = append(attrs, slog.String("subject", sub.Subject))
			}
			log.Error("nats: asynchronous error", attrs...)
		}),
	}
	switch {
	case opts.Creds != "":
		nopts = append(nopts, nats.UserCredentials(opts.Creds))
	case opts.NKeyFile != "":
		o, err := nats.NkeyOptionFromSeed(opts.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("jetstream: nats nkey seed file %s: %w", opts.NKeyFile, err)
		}
		nopts = append(nopts, o)
	case opts.User != "":
		nopts = append(nopts, nats.UserInfo(opts.User, opts.Password))
	}
	if opts.CAFile != "" {
		nopts = append(nopts, nats.RootCAs(opts.CAFile))
	}
	if opts.CertFile != "" {
		nopts = append(nopts, nats.ClientCert(opts.CertFile, opts.KeyFile))
	}
	nc, err := nats.Connect(opts.URL, nopts...)
	if err != nil {
		return nil, fmt.Errorf("jetstream: connect to nats at %s: %w", RedactURL(opts.URL), err)
	}
	return nc, nil
}

// Closed returns a channel that is closed once nc is closed for good: by
// Close or Drain, or by the client itself after an error it does not
// reconnect from, such as a protocol error ("maximum control line
// exceeded") or the server refusing its credentials twice in a row.
// Reconnects after an outage never give up (see Connect), so a connection
// the process did not close itself is gone for good only then. A
// long-running process that sees it should report itself dead and exit
// non-zero, so that its supervisor starts it again with a new connection.
func Closed(nc *nats.Conn) <-chan struct{} {
	done := make(chan struct{})
	events := nc.StatusChanged(nats.CLOSED)
	go func() {
		defer close(done)
		if nc.IsClosed() { // closed before the listener was registered
			return
		}
		<-events
	}()
	return done
}

// RedactURL returns a server URL, or a comma-separated list of them, with
// passwords and tokens replaced by "xxxxx", fit for logs and errors.
func RedactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		parts[i] = redactOne(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

func redactOne(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	withScheme := s
	if !strings.Contains(s, "://") {
		withScheme = "nats://" + s
	}
	u, err := url.Parse(withScheme)
	if err != nil || u.User == nil {
		// Not parseable: keep only what follows the userinfo.
		return "xxxxx@" + s[strings.LastIndex(s, "@")+1:]
	}
	if _, hasPassword := u.User.Password(); hasPassword {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	} else {
		u.User = url.User("xxxxx") // a bare user part is a token
	}
	out := u.String()
	if withScheme != s {
		out = strings.TrimPrefix(out, "nats://")
	}
	return out
}
