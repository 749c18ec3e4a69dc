package natstest_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
)

// childEnv makes the test binary act as the child program named by its
// value instead of running the tests.
const childEnv = "NATSTEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// child is the program the tests start: "lock DIR PORT..." takes the
// locks of the ports in DIR as FreePorts does, prints "locked" and holds
// them until it is killed.
func child(mode string, args []string) int {
	if mode != "lock" || len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: lock DIR PORT...")
		return 2
	}
	var unlocks []func() // referenced until the end: an unreachable lock's file is closed
	for _, a := range args[1:] {
		port, err := strconv.Atoi(a)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		unlock, ok, err := natstest.LockPort(args[0], port)
		if !ok || err != nil {
			fmt.Fprintf(os.Stderr, "lock of port %d: held elsewhere or %v\n", port, err)
			return 2
		}
		unlocks = append(unlocks, unlock)
	}
	fmt.Println("locked")
	wait := make(chan os.Signal, 1)
	signal.Notify(wait, os.Interrupt)
	<-wait
	for _, unlock := range unlocks {
		unlock()
	}
	return 0
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
