package toolpool_test

import (
	"context"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/pkg/discovery"
	"github.com/toolpool/toolpool/pkg/worker"
)

// TestServerAnnouncesItsSlots: each worker of a Server announces its
// concurrency as its slots, so the live catalog knows the fleet's.
func TestServerAnnouncesItsSlots(t *testing.T) {
	t.Parallel()
	p := setup(t)
	srv, err := toolpool.NewServer(toolpool.ServerConfig{Conn: p.nc, Registry: p.reg, Workers: 2,
		Worker: worker.Config{Concurrency: 3}, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	j, err := js.New(p.nc)
	if err != nil {
		t.Fatal(err)
	}
	live, err := discovery.NewCatalog(discovery.CatalogConfig{JetStream: j, Logger: natstest.Logger(t)})
	if err == nil {
		err = live.Start(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Stop(context.Background()) })
	natstest.Eventually(t, time.Minute, "both workers announced", func() bool { return len(live.Workers(t.Context(), "hold")) == 2 })
	if info, ok := live.Lookup(t.Context(), "hold"); !ok || info.Slots != 6 {
		t.Errorf("Lookup(hold) = %+v, %v; want 6 slots (2 workers of 3)", info, ok)
	}
}
