package rescache

import (
	"time"

	"github.com/toolpool/toolpool/internal/orchestrator/policy"
)

// Metrics receives the cache's measurements. Implementations must be safe
// for concurrent use and must not block; metrics.Cache is the Prometheus
// one. Tool names come from the catalog.
type Metrics interface {
	// Outcome counts what the cache did for one call of tool: "hit",
	// "miss", "coalesced" or "bypass" (policy.CacheOutcome's names). The
	// gate reports it through Store.Observe.
	Outcome(tool, outcome string)
	// Stored counts a result of tool stored, of size bytes.
	Stored(tool string, size int)
	// Failed counts an operation that failed ("get", "put"): the call went
	// on without the cache.
	Failed(op string)
	// Lookup observes a Get's duration; found says whether it was a hit.
	Lookup(d time.Duration, found bool)
}

// Observe reports what the cache did for a call of tool to the metrics
// (nothing for policy.CacheNone). The gate calls it once per cacheable
// call, after it knows the outcome.
func (s *Store) Observe(tool string, o policy.CacheOutcome) {
	if s.cfg.Metrics != nil && o != policy.CacheNone {
		s.cfg.Metrics.Outcome(tool, o.String())
	}
}

// failed counts a failed operation.
func (s *Store) failed(op string) {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Failed(op)
	}
}
