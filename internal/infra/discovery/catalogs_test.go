package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/tools"
)

func TestStaticCatalog(t *testing.T) {
	t.Parallel()
	c := StaticCatalog("b", "a", "b")
	ctx := context.Background()
	if got := fmt.Sprint(c.Names(ctx)); got != "[a b]" {
		t.Errorf("Names = %s", got)
	}
	if info, ok := c.Lookup(ctx, "a"); !ok || info.Name != "a" {
		t.Errorf("Lookup(a) = %v, %v", info, ok)
	}
	if _, ok := c.Lookup(ctx, "c"); ok {
		t.Error("Lookup(c) found an unknown tool")
	}
	c.Names(ctx)[0] = "changed"
	if c.Names(ctx)[0] != "a" {
		t.Error("Names shares its slice with the caller")
	}
}

func TestRegistryCatalog(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry()
	for _, name := range []string{"search", "read_file"} {
		reg.MustRegister(tools.Tool{
			Name:        name,
			InputSchema: json.RawMessage(`{"type":"object"}`),
			Handler: func(context.Context, json.RawMessage) (tools.Output, error) {
				return tools.Text("ok"), nil
			},
		})
	}
	c := RegistryCatalog(reg)
	ctx := context.Background()
	if got := fmt.Sprint(c.Names(ctx)); got != "[read_file search]" {
		t.Errorf("Names = %s", got)
	}
	if info, ok := c.Lookup(ctx, "search"); !ok || info.Name != "search" {
		t.Errorf("Lookup(search) = %v, %v", info, ok)
	}
	if _, ok := c.Lookup(ctx, "write_file"); ok {
		t.Error("Lookup found an unregistered tool")
	}
}

func addConsumer(t *testing.T, j js.JetStream, name, filter string) {
	t.Helper()
	_, err := j.CreateOrUpdateConsumer(context.Background(), jetstream.StreamCalls, js.ConsumerConfig{
		Durable: name, FilterSubject: filter, AckPolicy: js.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fakeClock is a settable time source.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestConsumerCatalog(t *testing.T) {
	t.Parallel()
	srv, _, j := natstest.StartProvisioned(t)
	addConsumer(t, j, jetstream.ConsumerName("search"), jetstream.CallSubject("search"))
	addConsumer(t, j, jetstream.ConsumerName("echo"), jetstream.CallSubject("echo"))
	addConsumer(t, j, "audit", "tools.call.audit") // not a tool consumer

	clock := &fakeClock{}
	clock.ns.Store(time.Now().UnixNano())
	c := ConsumerCatalog(j, time.Second).(*consumerCatalog)
	c.now = clock.now
	c.listTimeout = 10 * time.Second // a listing that times out under load keeps the old one
	ctx := context.Background()

	if got := fmt.Sprint(c.Names(ctx)); got != "[echo search]" {
		t.Errorf("Names = %s", got)
	}
	if info, ok := c.Lookup(ctx, "search"); !ok || info.Name != "search" {
		t.Errorf("Lookup(search) = %v, %v", info, ok)
	}
	if _, ok := c.Lookup(ctx, "audit"); ok {
		t.Error("a consumer without the tool_ prefix counts as a tool")
	}

	// A new consumer shows up once the cached listing is older than ttl.
	addConsumer(t, j, jetstream.ConsumerName("sleep"), jetstream.CallSubject("sleep"))
	if _, ok := c.Lookup(ctx, "sleep"); ok {
		t.Error("the listing was not cached")
	}
	clock.advance(1100 * time.Millisecond)
	if _, ok := c.Lookup(ctx, "sleep"); !ok {
		t.Error("a new tool consumer is not seen after ttl")
	}

	// Concurrent lookups during a refresh all get an answer.
	clock.advance(2 * time.Second)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, ok := c.Lookup(ctx, "echo"); !ok {
				t.Error("Lookup(echo) failed during a refresh")
			}
		})
	}
	wg.Wait()

	// When listing fails, the last good listing is kept.
	fresh := ConsumerCatalog(j, time.Second).(*consumerCatalog)
	fresh.listTimeout = 200 * time.Millisecond
	c.listTimeout = 200 * time.Millisecond // the server is gone: do not wait long for it
	srv.Shutdown()
	clock.advance(2 * time.Second)
	if _, ok := c.Lookup(ctx, "echo"); !ok {
		t.Error("the last good listing was dropped on a failed refresh")
	}
	if _, ok := c.Lookup(ctx, "nope"); ok {
		t.Error("an unknown tool was accepted with a good listing at hand")
	}
	// With no good listing at all, lookups fail open.
	if _, ok := fresh.Lookup(ctx, "anything"); !ok {
		t.Error("a catalog that never listed must fail open")
	}
	if names := fresh.Names(ctx); len(names) != 0 {
		t.Errorf("Names = %v, want none", names)
	}
}
