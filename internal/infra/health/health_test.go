package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// probe GETs path and returns the status code and the report.
func probe(t *testing.T, base, path string) (int, health.Report) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep health.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatalf("GET %s: body is not a report: %v", path, err)
	}
	return resp.StatusCode, rep
}

func serve(t *testing.T, h *health.Handler) string {
	t.Helper()
	mux := http.NewServeMux()
	h.Register(mux)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs.URL
}

func TestChecksInOrder(t *testing.T) {
	t.Parallel()
	var started atomic.Bool
	var calls atomic.Int32
	h := health.New(time.Second,
		health.Flag("worker", &started, "starting"),
		health.Check{Name: "later", Func: func(context.Context) error { calls.Add(1); return errors.New("never") }},
	)
	base := serve(t, h)

	code, rep := probe(t, base, "/readyz")
	if code != http.StatusServiceUnavailable || rep.Status != health.StatusNotReady ||
		rep.Checks["worker"] != "starting" || rep.Checks["later"] != "skipped" {
		t.Errorf("before start: %d %+v", code, rep)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("a check after a failed one ran %d times", n)
	}
	if code, rep := probe(t, base, "/healthz"); code != http.StatusOK || rep.Status != health.StatusOK {
		t.Errorf("healthz: %d %+v", code, rep)
	}

	started.Store(true)
	code, rep = probe(t, base, "/readyz")
	if code != http.StatusServiceUnavailable || rep.Checks["worker"] != "ok" || rep.Checks["later"] != "never" {
		t.Errorf("after start: %d %+v", code, rep)
	}
}

// TestReadinessFollowsNATS: readyz answers 503 while the NATS server is
// down and 200 again once it is back on the same address and store.
func TestReadinessFollowsNATS(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	u, err := url.Parse(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Dir(srv.StoreDir())
	nc := natstest.Connect(t, srv.ClientURL())
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	h := health.New(time.Second, health.NATSConnected(nc), health.Streams(j), health.Consumers(j, []string{"echo"}))
	base := serve(t, h)
	// No streams yet.
	if code, rep := probe(t, base, "/readyz"); code != http.StatusServiceUnavailable || rep.Checks["nats"] != "ok" || rep.Checks["streams"] == "ok" {
		t.Fatalf("before provisioning: %d %+v", code, rep)
	}
	if err := jetstream.Provision(ctx, j, jetstream.Config{}); err != nil {
		t.Fatal(err)
	}
	// Streams, but the worker's consumer is not bound.
	if code, rep := probe(t, base, "/readyz"); code != http.StatusServiceUnavailable || rep.Checks["streams"] != "ok" || rep.Checks["consumers"] == "ok" {
		t.Fatalf("before the consumer: %d %+v", code, rep)
	}
	if _, err := jetstream.EnsureConsumer(ctx, j, jetstream.ConsumerSpec{Tool: "echo"}); err != nil {
		t.Fatal(err)
	}
	if code, rep := probe(t, base, "/readyz"); code != http.StatusOK || rep.Status != health.StatusReady {
		t.Fatalf("ready: %d %+v", code, rep)
	}

	srv.Shutdown()
	code, rep := probe(t, base, "/readyz")
	// The client may not have noticed the disconnect yet: then the streams
	// check is the one that fails.
	if code != http.StatusServiceUnavailable || rep.Status != health.StatusNotReady ||
		(rep.Checks["nats"] == "ok" && rep.Checks["streams"] == "ok") {
		t.Errorf("with NATS down: %d %+v, want 503 naming nats or streams", code, rep)
	}
	if code, _ := probe(t, base, "/healthz"); code != http.StatusOK {
		t.Errorf("healthz with NATS down: %d, want 200 (the process is alive)", code)
	}

	again, err := embedded.Start(embedded.Options{Listen: u.Host, DataDir: dataDir, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(again.Shutdown)
	deadline := time.Now().Add(time.Minute)
	for {
		code, rep = probe(t, base, "/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz never recovered after NATS came back: %d %+v", code, rep)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A failing detail is reported but keeps the probe ready, and details run
// after a failed check too.
func TestDetailsDoNotFail(t *testing.T) {
	t.Parallel()
	var ready atomic.Bool
	ready.Store(true)
	down := health.AsDetails(health.Check{Name: "mcp:docs", Func: func(context.Context) error { return errors.New("mcp server docs: down") }})
	base := serve(t, health.New(time.Second, append([]health.Check{health.Flag("worker", &ready, "starting")}, down...)...))
	code, rep := probe(t, base, "/readyz")
	if code != http.StatusOK || rep.Checks["mcp:docs"] != "mcp server docs: down" {
		t.Fatalf("with a failing detail: %d %+v; want 200 naming the detail's error", code, rep)
	}
	ready.Store(false)
	code, rep = probe(t, base, "/readyz")
	if code != http.StatusServiceUnavailable || rep.Checks["mcp:docs"] != "mcp server docs: down" {
		t.Fatalf("with a failing check: %d %+v; want 503 with the detail still run", code, rep)
	}
}
