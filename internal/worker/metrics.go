package worker

import (
	"github.com/toolpool/toolpool/internal/pooltype"
)

// Event is what the worker reports of one delivery's handling
// (pooltype.WorkerEvent).
type Event = pooltype.WorkerEvent

// Metrics observes a worker. Implementations must be safe for concurrent use
// and cheap: they are called on the hot path. The Prometheus implementation
// lives outside this package.
type Metrics interface {
	// Observe is called once per delivery, when its fate is settled.
	Observe(Event)
	// InFlight is called with +1 when a call starts executing and -1 when it
	// ends.
	InFlight(tool string, delta int)
}

// QueueMetrics is implemented by a Metrics that also counts the calls a
// worker has pulled but cannot start yet, because every slot is busy
// (several tools pulled for the same free slots). Queued is called with +1
// when such a call starts waiting for a slot and -1 when it stops waiting
// (it got a slot, or the worker stopped and handed it back). Calls that
// stay queued for long mean a worker's slots are held by another tool's
// slow calls while this tool's calls wait: see docs/operations.md.
type QueueMetrics interface {
	Queued(tool string, delta int)
}

type nopMetrics struct{}

func (nopMetrics) Queued(string, int) {}

func (nopMetrics) Observe(Event)        {}
func (nopMetrics) InFlight(string, int) {}
