package rescache

import "time"

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
