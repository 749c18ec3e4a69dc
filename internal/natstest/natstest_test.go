package natstest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestStartProvisioned(t *testing.T) {
	t.Parallel()
	start := time.Now()
	srv, nc, j := natstest.StartProvisioned(t)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("StartProvisioned took %v", d)
	}
	if !strings.HasPrefix(srv.ClientURL(), "nats://127.0.0.1:") || strings.HasSuffix(srv.ClientURL(), ":4222") {
		t.Errorf("test server URL %s, want a random loopback port", srv.ClientURL())
	}
	if !nc.IsConnected() {
		t.Error("connection is not connected")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, name := range []string{jetstream.StreamCalls, jetstream.StreamResults, jetstream.StreamDLQ} {
		if _, err := j.Stream(ctx, name); err != nil {
			t.Errorf("stream %s: %v", name, err)
		}
	}
}

func TestServersAreIndependent(t *testing.T) {
	t.Parallel()
	a, b := natstest.Start(t), natstest.Start(t)
	if a.ClientURL() == b.ClientURL() || a.StoreDir() == b.StoreDir() {
		t.Errorf("two servers share %s / %s", a.ClientURL(), a.StoreDir())
	}
	nc := natstest.Connect(t, b.ClientURL())
	if err := nc.Flush(); err != nil {
		t.Error(err)
	}
}
