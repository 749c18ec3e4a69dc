package health_test

import (
	"net/http"
	"testing"

	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/natstest"
)

// TestLivenessFailsOnClosedConnection: /healthz answers 200 while the NATS
// connection lives (also while it reconnects) and 503 once it is closed for
// good; /readyz fails too.
func TestLivenessFailsOnClosedConnection(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.ClientURL())
	h := health.New(0, health.NATSConnected(nc)).WithLiveness(health.NATSNotClosed(nc))
	base := serve(t, h)
	if code, rep := probe(t, base, "/healthz"); code != http.StatusOK || rep.Status != health.StatusOK {
		t.Fatalf("/healthz with a live connection: %d %+v", code, rep)
	}
	nc.Close()
	code, rep := probe(t, base, "/healthz")
	if code != http.StatusServiceUnavailable || rep.Status != health.StatusNotOK || rep.Checks["nats"] == "ok" {
		t.Errorf("/healthz with a closed connection: %d %+v; want 503 naming nats", code, rep)
	}
	if code, _ := probe(t, base, "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with a closed connection: %d", code)
	}
}
