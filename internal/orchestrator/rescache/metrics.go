package rescache

import (
	"time"

	"github.com/toolpool/toolpool/internal/orchestrator/policy"
)

// Metrics receives the cache's measurements. Implementations must be safe
// for concurrent use and must not block; metrics.Cache is the Prometheus
// one (which also counts the gate's outcomes per call: its Outcome).
// Tool names come from the catalog.
type Metrics interface {
	// Stored counts a result of tool stored, of size bytes.
	Stored(tool string, size int)
	// Failed counts an operation that failed ("get", "put", "claim",
	// "release", "await"): the call went on without the cache.
	Failed(op string)
	// Lookup observes a Get's duration; found says whether it was a hit.
	Lookup(d time.Duration, found bool)
}

// failed counts a failed operation.
func (s *Store) failed(op string) {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Failed(op)
	}
}

// Outcomes counts what the cache did for each call (metrics.Cache's
// Outcome): "hit", "miss", "coalesced", "bypass".
type Outcomes interface {
	Outcome(tool, outcome string)
}

// GateMetrics returns the policy gate's Metrics (policy.Config.Metrics)
// counting each cacheable call's outcome with o.
func GateMetrics(o Outcomes) policy.Metrics { return gateMetrics{o} }

type gateMetrics struct{ o Outcomes }

// CacheOutcome counts one call's outcome (nothing for policy.CacheNone).
func (g gateMetrics) CacheOutcome(tool string, o policy.CacheOutcome) {
	if s := o.String(); s != "" {
		g.o.Outcome(tool, s)
	}
}
