package health_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/jetstream"
)

// TestStoreWritableFailsOnFullStore: /readyz reports a store that cannot
// write. A real embedded server whose JetStream store is capped is filled
// until it refuses writes: the streams are all still there (a look-up
// succeeds), but the write probe fails and /readyz answers 503.
func TestStoreWritableFailsOnFullStore(t *testing.T) {
	t.Parallel()
	srv, err := embedded.Start(embedded.Options{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), MaxStore: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL())
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
	if err := jetstream.Provision(ctx, j, jetstream.Config{DLQMaxBytes: -1}); err != nil {
		t.Fatal(err)
	}
	base := serve(t, health.New(10*time.Second, health.Streams(j), health.StoreWritable(j)))
	if code, rep := probe(t, base, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before the store filled up: %d %+v", code, rep)
	}

	chunk := bytes.Repeat([]byte("x"), 64<<10)
	full := false
	for range 64 { // 4 MiB at most into a 1 MiB store
		if _, err := j.Publish(ctx, jetstream.ResultSubject("filler", "fill"), chunk); err != nil {
			t.Logf("the store refused a write: %v", err)
			full = true
			break
		}
	}
	if !full {
		t.Fatal("the capped store accepted 4 MiB")
	}
	code, rep := probe(t, base, "/readyz")
	if code != http.StatusServiceUnavailable || rep.Checks["streams"] != "ok" || rep.Checks["store"] == "ok" {
		t.Errorf("/readyz with a full store: %d %+v; want 503 from the store check, the streams ok", code, rep)
	}
	t.Logf("store check: %s", rep.Checks["store"])
}
