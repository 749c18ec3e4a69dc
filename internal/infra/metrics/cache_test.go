package metrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/promtest"
)

// TestCache: outcomes by tool, stores, failures and look-ups, with labels
// bounded, in a scrape promtool accepts.
func TestCache(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	m, err := NewCache(reg, CacheOptions{MaxTools: 3})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		m.Outcome("search", "hit")
	}
	m.Outcome("search", "miss")
	m.Outcome("search", "coalesced")
	m.Outcome("fetch", "bypass")
	m.Outcome("fetch", "made-up")
	m.Stored("search", 1200)
	m.Stored("search", 800)
	m.Failed("put")
	m.Failed("weird")
	m.Lookup(80*time.Microsecond, true)
	m.Lookup(time.Millisecond, false)
	for i := range 10 { // more tools than MaxTools
		m.Outcome(fmt.Sprintf("t%d", i), "hit")
	}
	fams, text := gather(t, reg)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"toolpool_cache_total", []string{"tool", "search", "outcome", "hit"}, 3},
		{"toolpool_cache_total", []string{"tool", "search", "outcome", "miss"}, 1},
		{"toolpool_cache_total", []string{"tool", "search", "outcome", "coalesced"}, 1},
		{"toolpool_cache_total", []string{"tool", "search", "outcome", "bypass"}, 0},
		{"toolpool_cache_total", []string{"tool", "fetch", "outcome", "bypass"}, 1},
		{"toolpool_cache_total", []string{"tool", "fetch", "outcome", "other"}, 1},
		{"toolpool_cache_stored_total", []string{"tool", "search"}, 2},
		{"toolpool_cache_stored_bytes_total", []string{"tool", "search"}, 2000},
		{"toolpool_cache_errors_total", []string{"op", "put"}, 1},
		{"toolpool_cache_errors_total", []string{"op", "get"}, 0},
		{"toolpool_cache_errors_total", []string{"op", "other"}, 1},
	} {
		if got := fams.Value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if tools := fams.LabelValues("toolpool_cache_total", "tool"); len(tools) > 4 {
		t.Errorf("tool labels %v: want at most 3 and %s", tools, UnknownTool)
	}
	if !fams.Has("toolpool_cache_lookup_seconds") {
		t.Error("no lookup histogram")
	}
	want := CacheTotals{Hits: 13, Misses: 1, Coalesced: 1, Bypassed: 1, Stored: 2, Errors: 2}
	if got := m.Totals(); got != want {
		t.Errorf("Totals = %+v, want %+v", got, want)
	}
	promtest.CheckMetrics(t, text)
}
