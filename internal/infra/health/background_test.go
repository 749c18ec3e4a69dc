package health_test

import (
	"context"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
)

// countJS counts, on a connection of its own, the JetStream API requests
// ($JS.API.>) and the store probes (health.StoreProbeSubject) published
// on the server at url. The returned func reads the counts of what was
// published before it was called.
func countJS(t *testing.T, url string) func() (api, store int64) {
	t.Helper()
	spy := natstest.Connect(t, url)
	apiSub, err := spy.SubscribeSync("$JS.API.>")
	if err != nil {
		t.Fatal(err)
	}
	storeSub, err := spy.SubscribeSync(health.StoreProbeSubject)
	if err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() (int64, int64) {
		// The server delivers what it got before the spy's PONG, and the
		// spy queues it before reading the PONG: the queues are complete.
		if err := spy.Flush(); err != nil {
			t.Fatal(err)
		}
		api, _, err := apiSub.Pending()
		if err != nil {
			t.Fatal(err)
		}
		store, _, err := storeSub.Pending()
		if err != nil {
			t.Fatal(err)
		}
		return int64(api), int64(store)
	}
}

// TestReadyzNoJetStreamRequestPerProbe: the readiness checks that need
// JetStream's API used to run at each probe: 3 stream look-ups and a
// stored message per probe, so a load balancer probing every 300 ms
// cost a replica 10 API requests a second (20 with two balancers). In the
// background they run once per interval however often /readyz is probed.
func TestReadyzNoJetStreamRequestPerProbe(t *testing.T) {
	t.Parallel()
	srv, nc, j := natstest.StartProvisioned(t)
	const probes = 50
	measure := func(h *health.Handler) (api, store int64, last health.Report) {
		count := countJS(t, srv.ClientURL())
		base := serve(t, h)
		for range probes {
			code, rep := probe(t, base, "/readyz")
			if code != http.StatusOK {
				t.Fatalf("/readyz: %d %+v", code, rep)
			}
			last = rep
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		api, store = count()
		return api, store, last
	}

	beforeAPI, beforeStore, _ := measure(health.New(0,
		health.NATSConnected(nc), health.Streams(j), health.StoreWritable(j)))
	t.Logf("checks at each probe: %d JetStream API requests and %d stored probes for %d probes", beforeAPI, beforeStore, probes)
	if beforeAPI < 3*probes || beforeStore < probes {
		t.Errorf("checks at each probe: %d API requests and %d stores for %d probes; the spy misses requests", beforeAPI, beforeStore, probes)
	}

	api, store, rep := measure(health.New(0, health.NATSConnected(nc),
		health.Background(health.Streams(j), time.Hour), health.Background(health.StoreWritable(j), time.Hour)))
	t.Logf("checks in the background: %d JetStream API requests and %d stored probes for %d probes", api, store, probes)
	if api != 3 || store != 1 {
		t.Errorf("checks in the background: %d API requests and %d stores for %d probes; want 3 and 1 (one refresh)", api, store, probes)
	}
	if _, ok := rep.Age["streams"]; !ok {
		t.Errorf("the report has no age for the streams check: %+v", rep)
	}
	if _, ok := rep.Age["nats"]; ok {
		t.Errorf("the report gives an age for the local nats check: %+v", rep)
	}
}

// TestReadyzFollowsNATSServer: with the JetStream checks in the background,
// /readyz turns 503 once the NATS server is stopped (the connection check
// runs at each probe), and back to 200 once it returns.
func TestReadyzFollowsNATSServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:0", DataDir: dir, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	u, err := url.Parse(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t, srv.ClientURL())
	j := provision(t, nc)
	const interval = 200 * time.Millisecond
	base := serve(t, health.New(0, health.NATSConnected(nc),
		health.Background(health.Streams(j), interval), health.Background(health.StoreWritable(j), interval)))
	if code, rep := probe(t, base, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with the server up: %d %+v", code, rep)
	}

	srv.Shutdown()
	// The client notices a closed connection at once; the bound is
	// generous for a loaded machine.
	natstest.Eventually(t, 10*time.Second, "/readyz to answer 503 with the server stopped", func() bool {
		code, rep := probe(t, base, "/readyz")
		return code == http.StatusServiceUnavailable && rep.Checks["nats"] != "ok"
	})

	srv, err = embedded.Start(embedded.Options{Listen: u.Host, DataDir: dir, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatalf("restarting the server on %s: %v", u.Host, err)
	}
	natstest.Eventually(t, time.Minute, "/readyz to answer 200 with the server back", func() bool {
		code, _ := probe(t, base, "/readyz")
		return code == http.StatusOK
	})
}

// TestReadyzStaleness: a background check whose refresh gets no answer
// keeps its last result (a slow JetStream does not flap readiness) until
// the result is StaleFactor intervals old; then /readyz fails, and comes
// back with the next answer.
func TestReadyzStaleness(t *testing.T) {
	t.Parallel()
	const interval = 300 * time.Millisecond
	var hang atomic.Bool
	var calls, timeouts atomic.Int32
	slow := health.Check{Name: "js", Func: func(ctx context.Context) error {
		calls.Add(1)
		if hang.Load() {
			<-ctx.Done() // JetStream does not answer
			timeouts.Add(1)
			return ctx.Err()
		}
		return nil
	}}
	base := serve(t, health.New(0, health.Background(slow, interval)))
	if code, rep := probe(t, base, "/readyz"); code != http.StatusOK || rep.Checks["js"] != "ok" {
		t.Fatalf("first probe: %d %+v", code, rep)
	}
	hang.Store(true)
	stale := health.StaleFactor * interval
	natstest.Eventually(t, time.Minute, "a refresh to time out", func() bool {
		code, rep := probe(t, base, "/readyz")
		if age := rep.Age["js"]; code != http.StatusOK && age < stale.Seconds() {
			t.Fatalf("/readyz failed with a result %.3fs old (stale after %s): %d %+v", age, stale, code, rep)
		}
		return timeouts.Load() > 0
	})
	var last health.Report
	natstest.Eventually(t, time.Minute, "/readyz to fail once the result is stale", func() bool {
		var code int
		code, last = probe(t, base, "/readyz")
		return code == http.StatusServiceUnavailable
	})
	if last.Age["js"] < stale.Seconds() {
		t.Errorf("/readyz failed on a result %.3fs old; stale after %s: %+v", last.Age["js"], stale, last)
	}
	t.Logf("stale: %+v", last)

	hang.Store(false)
	natstest.Eventually(t, time.Minute, "/readyz to answer 200 once the check answers again", func() bool {
		code, _ := probe(t, base, "/readyz")
		return code == http.StatusOK
	})
	if n := calls.Load(); n < 3 {
		t.Errorf("the check ran %d times", n)
	}
}

// TestReadyzDrainingAtOnce: a local check (the server draining) fails the
// very next probe, whatever the background checks' last results.
func TestReadyzDrainingAtOnce(t *testing.T) {
	t.Parallel()
	_, nc, j := natstest.StartProvisioned(t)
	var serving atomic.Bool
	serving.Store(true)
	base := serve(t, health.New(0, health.NATSConnected(nc), health.Background(health.Streams(j), time.Hour),
		health.Flag("http", &serving, "shutting down")))
	if code, rep := probe(t, base, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz serving: %d %+v", code, rep)
	}
	serving.Store(false)
	if code, rep := probe(t, base, "/readyz"); code != http.StatusServiceUnavailable || rep.Checks["http"] != "shutting down" {
		t.Errorf("/readyz draining: %d %+v; want 503 from the http check", code, rep)
	}
}

// TestBackgroundKeyedConsumers: the consumers check of a background
// ConsumersOf stands only for the tools it was made for: when the tools
// served change, the next probe checks again at once.
func TestBackgroundKeyedConsumers(t *testing.T) {
	t.Parallel()
	_, _, j := natstest.StartProvisioned(t)
	var tools atomic.Pointer[[]string]
	tools.Store(&[]string{})
	base := serve(t, health.New(0, health.Background(health.ConsumersOf(j, func() []string { return *tools.Load() }), time.Hour)))
	if code, rep := probe(t, base, "/readyz"); code != http.StatusOK {
		t.Fatalf("no tools: %d %+v", code, rep)
	}
	tools.Store(&[]string{"missing"})
	code, rep := probe(t, base, "/readyz")
	if code != http.StatusServiceUnavailable {
		t.Errorf("a tool without a consumer: %d %+v; want 503", code, rep)
	}
}

// provision provisions the streams on nc's server.
func provision(t *testing.T, nc *nats.Conn) js.JetStream {
	t.Helper()
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := jetstream.Provision(ctx, j, jetstream.Config{}); err != nil {
		t.Fatal(err)
	}
	return j
}

// TestBackgroundPanic: a background check that panics fails the probe;
// it does not take the process down with it.
func TestBackgroundPanic(t *testing.T) {
	t.Parallel()
	bad := health.Check{Name: "bad", Func: func(context.Context) error { panic("boom") }}
	base := serve(t, health.New(0, health.Background(bad, time.Hour)))
	code, rep := probe(t, base, "/readyz")
	if code != http.StatusServiceUnavailable || rep.Checks["bad"] != "the check panicked" {
		t.Errorf("/readyz with a panicking check: %d %+v", code, rep)
	}
}
