package discovery

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/pooltype"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/pkg/tools"
)

// fairRegistry holds one tool, "review", with the fair-share settings
// given.
func fairRegistry(t testing.TB, concurrency int, fairness string, perKey tools.KeyLimits) *tools.Registry {
	t.Helper()
	reg := tools.NewRegistry()
	reg.MustRegister(tools.Tool{
		Name: "review", Description: "Reviews.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Concurrency: concurrency, Fairness: fairness, PerKey: perKey,
		Handler: func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text("ok"), nil },
	})
	return reg
}

func announceSlots(t *testing.T, url, workerID string, slots int, reg *tools.Registry) *Announcer {
	t.Helper()
	return announceWith(t, AnnouncerConfig{JetStream: connect(t, url), Registry: reg, WorkerID: workerID, Slots: slots})
}

// TestLookupSlots: the fleet's slots of a tool are the sum of its live
// workers' slots, capped by the tool's concurrency; its fairness key and
// per-key limits come with the lookup; a worker gone takes its slots
// away, and one that announces no slots makes them unknown.
func TestLookupSlots(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	limits := tools.KeyLimits{Concurrency: 4, Rate: 50}
	a := announceSlots(t, srv.ClientURL(), "worker-a", 8, fairRegistry(t, 100, "input.repo", limits))
	announceSlots(t, srv.ClientURL(), "worker-b", 16, fairRegistry(t, 100, "input.repo", limits))
	c := newCatalog(t, connect(t, srv.ClientURL()))
	ctx := t.Context()

	lookup := func() pooltype.ToolInfo {
		info, ok := c.Lookup(ctx, "review")
		if !ok {
			t.Fatalf("review is not live: %+v", info)
		}
		return info
	}
	eventually(t, "both workers counted", func() bool { return lookup().Slots == 24 })
	want := pooltype.ToolInfo{Name: "review", Slots: 24, Fairness: "input.repo",
		PerKey:  tools.KeyLimits{Concurrency: 4, Rate: 50, Per: time.Second, Burst: 50},
		Version: toolVersion(BuildVersion(), c.Definitions(ctx)[0])}
	if got := lookup(); got != want {
		t.Errorf("Lookup = %+v, want %+v", got, want)
	}

	// The tool's concurrency caps the slots: a newer worker says 10.
	announceSlots(t, srv.ClientURL(), "worker-c", 16, fairRegistry(t, 10, tools.FairnessSession, tools.KeyLimits{}))
	eventually(t, "the newest worker's settings", func() bool {
		info := lookup()
		return info.Slots == 10 && info.Fairness == tools.FairnessSession && info.PerKey.IsZero()
	})

	// A worker that stops takes its slots away.
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "worker-a withdrawn", func() bool { return len(c.Workers(ctx, "review")) == 2 })
	if got := lookup().Slots; got != 10 {
		t.Errorf("slots after worker-a stopped: %d, want 10 (min(16+16, 10))", got)
	}

	// A worker that does not announce its slots (an older one) makes the
	// fleet's slots unknown: 0.
	announceSlots(t, srv.ClientURL(), "worker-old", 0, fairRegistry(t, 10, "", tools.KeyLimits{}))
	eventually(t, "slots unknown", func() bool { return len(c.Workers(ctx, "review")) == 3 && lookup().Slots == 0 })
}

// TestAnnouncementCarriesFairShares: what a worker announces of a tool.
func TestAnnouncementCarriesFairShares(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	announceSlots(t, srv.ClientURL(), "w", 32, fairRegistry(t, 0, "input.repo", tools.KeyLimits{Concurrency: 2}))
	c := newCatalog(t, connect(t, srv.ClientURL()))
	var ws []Announcement
	eventually(t, "announced", func() bool { ws = c.Workers(t.Context(), "review"); return len(ws) == 1 })
	a := ws[0]
	if a.Slots != 32 || a.Fairness != "input.repo" || a.PerKey == nil || *a.PerKey != (tools.KeyLimits{Concurrency: 2}) ||
		a.Concurrency != tools.ConcurrencyDefault {
		t.Errorf("announcement %+v (per_key %+v)", a, a.PerKey)
	}
	if info, _ := c.Lookup(t.Context(), "review"); info.Slots != 32 {
		t.Errorf("slots %d, want 32 (below the default concurrency)", info.Slots)
	}
	if _, err := NewAnnouncer(AnnouncerConfig{JetStream: fakeJS{}, Registry: tools.NewRegistry(), WorkerID: "w", Slots: -1}); err == nil {
		t.Error("Slots -1 accepted")
	}
}

// BenchmarkLookup: a lookup on the dispatch path reads the tool's summary
// made when its announcements changed (no allocation, no sort).
func BenchmarkLookup(b *testing.B) {
	srv := natstest.Start(b)
	j := connect(b, srv.ClientURL())
	for _, id := range []string{"worker-a", "worker-b", "worker-c"} {
		a, err := NewAnnouncer(AnnouncerConfig{JetStream: j, Registry: fairRegistry(b, 100, "", tools.KeyLimits{}), WorkerID: id, Slots: 16})
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Start(b.Context()); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = a.Stop(context.Background()) })
	}
	c, err := NewCatalog(CatalogConfig{JetStream: j})
	if err == nil {
		err = c.Start(b.Context())
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Stop(context.Background()) })
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if info, ok := c.Lookup(ctx, "review"); !ok || info.Slots != 48 {
			b.Fatalf("Lookup = %+v, %v", info, ok)
		}
	}
}
