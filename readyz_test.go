package toolpool_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/natstest"
)

// The readiness probes of an Orchestrator and a Server ask JetStream's API
// in the background, not at each probe: a load balancer probing /readyz
// every 300 ms used to cost each replica 3 stream look-ups and a stored
// message (an orchestrator) or 3 look-ups and a consumer look-up per tool
// (a worker) at each probe.
func TestReadyzAsksJetStreamInTheBackground(t *testing.T) {
	t.Parallel()
	p := setup(t)
	srv, orch := p.start(t)
	spy := natstest.Connect(t, p.nc.ConnectedUrl())
	var subs [3]interface{ Pending() (int, int, error) }
	for i, subject := range []string{"$JS.API.STREAM.INFO.>", "$JS.API.CONSUMER.INFO.>", health.StoreProbeSubject} {
		sub, err := spy.SubscribeSync(subject)
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = sub
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}

	const probes = 30
	for name, h := range map[string]http.Handler{"orchestrator": orch.Handler(), "server": srv.Handler()} {
		for range probes {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("%s /readyz: %d %s", name, rec.Code, rec.Body)
			}
		}
	}
	if err := p.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil { // what the server got before is queued
		t.Fatal(err)
	}
	var n [3]int
	for i, sub := range subs {
		var err error
		if n[i], _, err = sub.Pending(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d probes of each: %d stream look-ups, %d consumer look-ups, %d stored probes", probes, n[0], n[1], n[2])
	// One refresh of each check runs per RefreshDefault (5 s): a few for
	// the whole test, however long it takes on a loaded machine.
	if n[0] >= probes || n[1] >= probes || n[2] >= probes {
		t.Errorf("%d probes of each made %d stream look-ups, %d consumer look-ups and %d stored probes; want a few refreshes, not one per probe",
			probes, n[0], n[1], n[2])
	}
}
