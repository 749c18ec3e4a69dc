package embedded_test

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
)

func TestEmbeddedSurvivesRestart(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	start := func() *embedded.Server {
		t.Helper()
		srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:0", DataDir: dataDir, Logger: natstest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		return srv
	}
	ctx := testContext(t)

	srv := start()
	if got, want := srv.StoreDir(), filepath.Join(dataDir, "jetstream"); got != want {
		t.Errorf("StoreDir() = %q, want %q", got, want)
	}
	nc := natstest.Connect(t, srv.ClientURL())
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := jetstream.Provision(ctx, j, jetstream.Config{}); err != nil {
		t.Fatal(err)
	}
	ack, err := j.Publish(ctx, jetstream.CallSubject("echo"), []byte(`{"text":"hi"}`), js.WithMsgID("toolu_durable"))
	if err != nil {
		t.Fatal(err)
	}
	before := streamInfos(t, j)
	nc.Close()
	srv.Shutdown()
	srv.Shutdown() // a second call is harmless
	if _, err := os.Stat(filepath.Join(dataDir, "jetstream")); err != nil {
		t.Fatalf("no store under DataDir/jetstream: %v", err)
	}

	srv = start()
	j, err = js.New(natstest.Connect(t, srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	if err := jetstream.Provision(ctx, j, jetstream.Config{}); err != nil {
		t.Fatalf("Provision after restart: %v", err)
	}
	after := streamInfos(t, j)
	if !after[jetstream.StreamCalls].Created.Equal(before[jetstream.StreamCalls].Created) {
		t.Error("TOOL_CALLS was re-created after restart")
	}
	s, err := j.Stream(ctx, jetstream.StreamCalls)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := s.GetMsg(ctx, ack.Sequence)
	if err != nil {
		t.Fatalf("call published before the restart is gone: %v", err)
	}
	if string(msg.Data) != `{"text":"hi"}` || msg.Header.Get(js.MsgIDHeader) != "toolu_durable" {
		t.Errorf("call after restart = %q (id %q)", msg.Data, msg.Header.Get(js.MsgIDHeader))
	}
	// The dedup window survives the restart too.
	dup, err := j.Publish(ctx, jetstream.CallSubject("echo"), []byte(`{"text":"hi"}`), js.WithMsgID("toolu_durable"))
	if err != nil {
		t.Fatal(err)
	}
	if !dup.Duplicate {
		t.Error("republishing the call after restart was not recognised as a duplicate")
	}
}

func TestEmbeddedListenAddressInUse(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()

	srv, err := embedded.Start(embedded.Options{Listen: addr, DataDir: t.TempDir(), Logger: natstest.Logger(t)})
	if err == nil {
		srv.Shutdown()
		t.Fatalf("Start on taken address %s succeeded", addr)
	}
	if !errors.Is(err, embedded.ErrListenAddrInUse) {
		t.Errorf("errors.Is(err, ErrListenAddrInUse) = false for %v", err)
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "in use") {
		t.Errorf("error %q does not say that %s is in use", err, addr)
	}
}

func TestEmbeddedStartErrors(t *testing.T) {
	t.Parallel()
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts embedded.Options
		want string
	}{
		{"no port", embedded.Options{Listen: "127.0.0.1"}, "want host:port"},
		{"bad port", embedded.Options{Listen: "127.0.0.1:http"}, "port must be a number"},
		{"port too big", embedded.Options{Listen: "127.0.0.1:70000"}, "port must be a number"},
		{"data dir is a file", embedded.Options{Listen: "127.0.0.1:0", DataDir: notADir}, "data dir " + notADir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.opts.Logger = slog.New(slog.DiscardHandler)
			if tc.opts.DataDir == "" {
				tc.opts.DataDir = t.TempDir()
			}
			srv, err := embedded.Start(tc.opts)
			if err == nil {
				srv.Shutdown()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestEmbeddedLogging(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		level       slog.Level
		wantNotices bool
	}{
		{slog.LevelInfo, false},
		{slog.LevelDebug, true},
	} {
		t.Run(tc.level.String(), func(t *testing.T) {
			t.Parallel()
			var logs natstest.LockedBuffer
			srv, err := embedded.Start(embedded.Options{
				Listen: "127.0.0.1:0", DataDir: t.TempDir(),
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: tc.level})),
			})
			if err != nil {
				t.Fatal(err)
			}
			srv.Shutdown()
			gotNotices := strings.Contains(logs.String(), "Starting nats-server")
			if gotNotices != tc.wantNotices {
				t.Errorf("at level %v, server notices logged = %v, want %v; log:\n%s", tc.level, gotNotices, tc.wantNotices, logs.String())
			}
			if tc.wantNotices && !strings.Contains(logs.String(), "component=nats-server") {
				t.Errorf("server lines are not tagged component=nats-server:\n%s", logs.String())
			}
		})
	}
}

func TestEmbeddedOptionsWithDefaults(t *testing.T) {
	t.Parallel()
	o := embedded.Options{}.WithDefaults()
	if o.Listen != "127.0.0.1:4222" || o.DataDir != "data" || o.ServerName != "toolpool" || o.Logger == nil ||
		o.MaxPayload != 8<<20 || o.ReadyTimeout != 10*time.Second {
		t.Errorf("Options{}.WithDefaults() = %+v", o)
	}
}
