package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
)

// NATSFlags are the connection flags. Credentials come from the environment
// (NATS_CREDS, NATS_USER/NATS_PASSWORD, NATS_NKEY, NATS_CA/NATS_CERT/NATS_KEY)
// or from the flags, which win.
type NATSFlags struct {
	opts jetstream.ConnectOptions
}

// Register adds --nats-url and the credential flags to fs, with defaults from
// the environment.
func (n *NATSFlags) Register(fs *flag.FlagSet) {
	n.opts = jetstream.ConnectOptionsFromEnv()
	fs.StringVar(&n.opts.URL, "nats-url", n.opts.URL, "NATS server URL(s), comma-separated (env NATS_URL)")
	fs.StringVar(&n.opts.Creds, "nats-creds", n.opts.Creds, "NATS .creds file (env NATS_CREDS)")
	fs.StringVar(&n.opts.NKeyFile, "nats-nkey", n.opts.NKeyFile, "file holding a NATS user nkey seed (env NATS_NKEY)")
	fs.StringVar(&n.opts.CAFile, "nats-ca", n.opts.CAFile, "PEM CA certificate for the server's TLS (env NATS_CA)")
	fs.StringVar(&n.opts.CertFile, "nats-cert", n.opts.CertFile, "PEM client certificate for mutual TLS (env NATS_CERT)")
	fs.StringVar(&n.opts.KeyFile, "nats-key", n.opts.KeyFile, "PEM client key for mutual TLS (env NATS_KEY)")
}

// RegisterReconnect adds --nats-reconnect-wait to fs, for the commands that
// keep their connection (worker, serve); call it after Register. The
// jitter added to each pause is half of it, at most
// jetstream.ReconnectJitterDefault (so 1 s with the default 2 s).
func (n *NATSFlags) RegisterReconnect(fs *flag.FlagSet) {
	fs.DurationVar(&n.opts.ReconnectWait, "nats-reconnect-wait", jetstream.ReconnectWaitDefault,
		"pause between attempts to reconnect to a NATS server, plus a random jitter of up to half of it (at most 1s); credentials refused on two attempts in a row close the connection for good")
}

// CheckReconnect validates --nats-reconnect-wait; its error names the flag.
func (n *NATSFlags) CheckReconnect() error {
	if n.opts.ReconnectWait <= 0 {
		return Usagef("--nats-reconnect-wait is %s; it must be positive", n.opts.ReconnectWait)
	}
	return nil
}

// URL is the server URL given, "" when none was.
func (n *NATSFlags) URL() string { return n.opts.URL }

// Connect connects to url (the flag's when empty) with the credentials given.
func (n *NATSFlags) Connect(url, name string, log *slog.Logger) (*nats.Conn, error) {
	o := n.opts
	if url != "" {
		o.URL = url
	}
	o.Name, o.Logger = name, log
	if o.ReconnectWait > 0 && o.ReconnectJitter == 0 {
		o.ReconnectJitter = min(o.ReconnectWait/2, jetstream.ReconnectJitterDefault)
	}
	nc, err := jetstream.Connect(o)
	if errors.Is(err, nats.ErrNoServers) {
		return nil, fmt.Errorf("%w (no NATS server answers there: give its address with --nats-url or NATS_URL; "+
			"`orchestrator serve` without --nats-url listens on its --nats-listen, default %s)", err, nats.DefaultURL)
	}
	return nc, err
}

// DrainConn drains nc (flushing acks and publishes still buffered) and waits
// up to timeout for it to close.
func DrainConn(nc *nats.Conn, timeout time.Duration) error {
	if nc == nil || nc.IsClosed() {
		return nil
	}
	if err := nc.Drain(); err != nil {
		nc.Close()
		return err
	}
	deadline := time.Now().Add(timeout)
	for !nc.IsClosed() {
		if time.Now().After(deadline) {
			nc.Close()
			return errors.New("nats: drain timed out; connection closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// ConnectJetStream connects like Connect (to the flags' URL) and returns the
// connection with its JetStream context. The caller closes the connection.
func (n *NATSFlags) ConnectJetStream(name string, log *slog.Logger) (*nats.Conn, js.JetStream, error) {
	nc, err := n.Connect("", name, log)
	if err != nil {
		return nil, nil, err
	}
	j, err := js.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, j, nil
}

// WarnLogger is the logger of the short-lived commands: warnings and errors
// only, as text on w.
func WarnLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
