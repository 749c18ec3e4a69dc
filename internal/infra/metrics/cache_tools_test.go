package metrics_test

import (
	"reflect"
	"testing"

	"github.com/toolpool/toolpool/internal/infra/metrics"
)

// ByTool reads back what Outcome counted, per tool, an unknown outcome
// in none of the four.
func TestCacheByTool(t *testing.T) {
	t.Parallel()
	m, err := metrics.NewCache(metrics.NewRegistry(), metrics.CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.ByTool(); len(got) != 0 {
		t.Errorf("ByTool before any outcome: %+v", got)
	}
	for _, o := range []struct{ tool, outcome string }{
		{"search", "hit"}, {"search", "hit"}, {"search", "miss"}, {"search", "coalesced"},
		{"fetch", "bypass"}, {"fetch", "miss"}, {"fetch", "nonsense"},
	} {
		m.Outcome(o.tool, o.outcome)
	}
	want := []metrics.CacheToolCounts{{Tool: "fetch", Miss: 1, Bypass: 1}, {Tool: "search", Hit: 2, Miss: 1, Coalesced: 1}}
	if got := m.ByTool(); !reflect.DeepEqual(got, want) {
		t.Errorf("ByTool = %+v, want %+v", got, want)
	}
}
