package metrics

import (
	"cmp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// CacheToolCounts are one tool's result-cache outcomes since the process
// started: answered from the cache, run and stored, waited for an
// identical call in flight, run afresh at the caller's request.
type CacheToolCounts struct {
	Tool                         string
	Hit, Miss, Coalesced, Bypass uint64
}

// ByTool returns the outcomes per tool label (UnknownTool past the cap),
// sorted by tool, for an overview (the console). It reads the counters of
// toolpool_cache_total, as a scrape of that family would.
func (m *Cache) ByTool() []CacheToolCounts {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		m.outcomes.Collect(ch)
		close(ch)
	}()
	byTool := map[string]*CacheToolCounts{}
	for metric := range ch {
		var d dto.Metric
		if metric.Write(&d) != nil {
			continue
		}
		var tool, outcome string
		for _, l := range d.GetLabel() {
			switch l.GetName() {
			case "tool":
				tool = l.GetValue()
			case "outcome":
				outcome = l.GetValue()
			}
		}
		c := byTool[tool]
		if c == nil {
			c = &CacheToolCounts{Tool: tool}
			byTool[tool] = c
		}
		n := uint64(d.GetCounter().GetValue())
		switch outcome {
		case "hit":
			c.Hit += n
		case "miss":
			c.Miss += n
		case "coalesced":
			c.Coalesced += n
		case "bypass":
			c.Bypass += n
		}
	}
	out := make([]CacheToolCounts, 0, len(byTool))
	for _, c := range byTool {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b CacheToolCounts) int { return cmp.Compare(a.Tool, b.Tool) })
	return out
}
