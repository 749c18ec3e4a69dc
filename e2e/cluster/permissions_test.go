package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/dlq"
)

// The accounts of jetstream/server/accounts.conf: a worker cannot publish
// calls, and a worker process started with credentials that may not bind
// the tool consumers stops at start, naming the subject it was refused.
func TestPermissions(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "120s")
	p := startPool(t, c) // R3 streams, provisioned as the orchestrator
	// The attempts bucket exists (the orchestrator creates it at start), so
	// the refused worker below fails on its consumer, not on the bucket.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := dlq.OpenHistory(ctx, p.j, dlq.HistoryConfig{Replicas: 3}); err != nil {
		t.Fatalf("create the attempts bucket: %v", err)
	}

	t.Run("worker may not publish calls", func(t *testing.T) {
		violations := make(chan error, 4)
		nc, err := nats.Connect(c.urls(), nats.UserInfo("worker", workerPassword),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				select {
				case violations <- err:
				default:
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		subject := jetstream.CallSubject("echo")
		if err := nc.Publish(subject, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
		select {
		case err := <-violations:
			if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), subject) {
				t.Errorf("async error %q; want a permissions violation naming %s", err, subject)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no permissions violation reported for a worker publishing a call")
		}
		// and JetStream holds no call
		j, err := js.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := j.Publish(ctx, subject, []byte(`{}`)); err == nil {
			t.Error("a worker's JetStream publish of a call was acknowledged")
		}
	})

	t.Run("worker without consumer permissions fails at start", func(t *testing.T) {
		// The ops user may read consumers of TOOL_CALLS but not create them.
		w := startWorkerProc(t, c, "ops", opsPassword, "--demo-tools")
		select {
		case <-w.done:
		case <-time.After(90 * time.Second):
			t.Fatalf("a worker with the ops user's permissions still runs:\n%s", w.out.String())
		}
		out := w.out.String()
		if w.err == nil {
			t.Errorf("worker exited 0; want a failure:\n%s", out)
		}
		if !strings.Contains(out, "worker: the NATS user may not use a subject the worker needs") ||
			!strings.Contains(out, `Publish to "$JS.API.CONSUMER.CREATE.TOOL_CALLS.tool_`) {
			t.Errorf("worker output does not name the refused subject:\n%s", out)
		}
		t.Logf("worker output:\n%s", tail(out, 1500))
	})
}
