package rescache_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/orchestrator/rescache"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// BenchmarkGetHit measures a hit: one direct get of a stored result of
// about 1 KB and its decoding, on an embedded server over loopback. It
// reports the p50 and p99 of the calls, in microseconds.
func BenchmarkGetHit(b *testing.B) {
	srv := natstest.Start(b)
	s := replica(b, srv.ClientURL(), rescache.Config{})
	ctx := ctxT(b)
	k, _ := s.Key(searchCall("acme", `{"q":"latency","limit":10}`))
	res := result(string(make([]byte, 1024)))
	res.Content = envelope.Text(string(slices.Repeat([]byte("a result line\n"), 73)))
	if err := s.Put(ctx, k, res, time.Hour); err != nil {
		b.Fatal(err)
	}
	took := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if _, found, err := s.Get(ctx, k); !found || err != nil {
			b.Fatalf("Get: %v, %v", found, err)
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkKey measures the key of a small input: canonical form and
// hash, no I/O.
func BenchmarkKey(b *testing.B) {
	var s rescache.Store
	c := searchCall("acme", `{"q":"latency","limit":10,"filters":{"lang":"go","year":[2025,2026]}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := s.Key(c); !ok {
			b.Fatal("no key")
		}
	}
}

// BenchmarkGateHit measures a turn of one call answered from the cache
// through the policy gate: catalog look-up, key, one direct get.
func BenchmarkGateHit(b *testing.B) {
	srv := natstest.Start(b)
	s := replica(b, srv.ClientURL(), rescache.Config{})
	g, err := policy.New(policy.Config{Next: &slowTool{open: make(chan struct{})}, Catalog: catalog{}, Cache: s})
	if err != nil {
		b.Fatal(err)
	}
	ctx := ctxT(b)
	k, _ := s.Key(&policy.Call{Tool: "search", Input: json.RawMessage(`{"q":"hit"}`), Info: pooltype.ToolInfo{Version: "v1", Cache: &tools.CachePolicy{TTL: time.Minute}}})
	if err := s.Put(ctx, k, result("cached"), time.Hour); err != nil {
		b.Fatal(err)
	}
	calls := []envelope.ToolUseBlock{{Type: "tool_use", ID: "toolu_1", Name: "search", Input: json.RawMessage(`{"q":"hit"}`)}}
	took := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		res, err := g.Dispatch(ctx, "s", calls)
		if err != nil || res[0].IsError || res[0].Content.Text() != "cached" {
			b.Fatalf("%+v, %v", res, err)
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
}
