// Package natstest starts real, in-process nats-servers with JetStream for
// tests: each on a free loopback port with its store in t.TempDir(), shut
// down when the test ends.
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		srv, nc, j := natstest.StartProvisioned(t)
//		_ = srv.ClientURL() // for a second connection, e.g. a worker's
//		_, err := j.Publish(t.Context(), jetstream.CallSubject("echo"), []byte(`{}`))
//		...
//	}
package natstest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/jetstream"
)

// Start starts an embedded JetStream server on a free loopback port with
// its store in t.TempDir(). The test's cleanup shuts it down. Server
// warnings and errors go to t.Log.
func Start(t testing.TB) *embedded.Server {
	t.Helper()
	logger := Logger(t) // registered first, so it is closed after Shutdown
	srv, err := embedded.Start(embedded.Options{
		Listen:  "127.0.0.1:0",
		DataDir: t.TempDir(),
		Logger:  logger,
	})
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// Connect connects to url with jetstream.Connect and short reconnect
// waits, named after the test. The test's cleanup closes the connection.
func Connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := jetstream.Connect(jetstream.ConnectOptions{
		URL:             url,
		Name:            t.Name(),
		Logger:          slog.New(slog.DiscardHandler),
		ReconnectWait:   50 * time.Millisecond,
		ReconnectJitter: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// RespondJSON answers every request on subject with v as JSON, on a
// connection of its own to url (a stand-in for a peer that serves the
// subject, such as an orchestrator answering jetstream.SchedStatsSubject).
// The connection closes when the test ends.
func RespondJSON(t testing.TB, url, subject string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	nc := Connect(t, url)
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond(data) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// StartProvisioned starts a server as Start does, connects to it and
// provisions the streams with the default topology.
func StartProvisioned(t testing.TB) (*embedded.Server, *nats.Conn, js.JetStream) {
	t.Helper()
	srv := Start(t)
	nc := Connect(t, srv.ClientURL())
	j, err := js.New(nc)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := jetstream.Provision(ctx, j, jetstream.Config{}); err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return srv, nc, j
}

// Logger returns a logger that writes records at warn level and above to
// t.Log, and drops them once the test and its cleanups are over (servers
// and connections may log from their own goroutines).
func Logger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct {
	t      testing.TB
	mu     sync.Mutex
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// Eventually polls cond every 10 ms until it holds, and fails the test
// when it still does not after limit. Waits in these tests are generous:
// the machines are shared and the tests run with -race.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// CallConsumerInfo returns the server's info on tool's consumer on
// TOOL_CALLS, failing the test when it cannot be read.
func CallConsumerInfo(t testing.TB, j js.JetStream, tool string) *js.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := j.Consumer(ctx, jetstream.StreamCalls, jetstream.ConsumerName(tool))
	if err != nil {
		t.Fatalf("consumer of %s: %v", tool, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatalf("consumer of %s: info: %v", tool, err)
	}
	return info
}

// PasswordServer is a real in-process nats-server with JetStream, the
// streams provisioned, that accepts one user with a password the test can
// change: a client then loses its connection and is refused on every
// reconnect, so nats.go closes it for good.
type PasswordServer struct {
	// URL is the server's client URL.
	URL  string
	srv  *server.Server
	opts func(password string) *server.Options
}

// StartPasswordServer starts a PasswordServer on a free loopback port for
// user with password; it is shut down when the test ends.
func StartPasswordServer(t testing.TB, user, password string) *PasswordServer {
	t.Helper()
	port := FreePorts(t, 1)[0]
	storeDir := t.TempDir()
	p := &PasswordServer{
		URL: fmt.Sprintf("nats://127.0.0.1:%d", port),
		opts: func(password string) *server.Options {
			return &server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: storeDir,
				NoSigs: true, NoLog: true, Username: user, Password: password}
		},
	}
	var err error
	p.srv, err = server.NewServer(p.opts(password))
	if err != nil {
		t.Fatal(err)
	}
	p.srv.Start()
	t.Cleanup(func() { p.srv.Shutdown(); p.srv.WaitForShutdown() })
	if !p.srv.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(p.URL, nats.UserInfo(user, password))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := jetstream.Provision(ctx, j, jetstream.Config{}); err != nil {
		t.Fatal(err)
	}
	return p
}

// ChangePassword makes the server accept only password from now on: the
// connections of the user are dropped and their reconnects refused.
func (p *PasswordServer) ChangePassword(t testing.TB, password string) {
	t.Helper()
	if err := p.srv.ReloadOptions(p.opts(password)); err != nil {
		t.Fatal(err)
	}
}
