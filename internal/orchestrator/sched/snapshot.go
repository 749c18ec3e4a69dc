package sched

import "time"

// OtherKey is the KeyStats.Key (and the metrics' tenant label) under which
// the keys beyond a snapshot's bound are summed.
const OtherKey = "other"

// Snapshot is one scheduler's state: one orchestrator replica's view of
// the fair shares, limits and priorities of the calls it dispatches. It
// is what an orchestrator answers on jetstream.SchedStatsSubject (JSON),
// what `orchestrator status --by-key` sums over the replicas, and what the
// metrics export.
type Snapshot struct {
	// Instance is the orchestrator's instance id.
	Instance string `json:"instance"`
	// At is when the snapshot was taken.
	At time.Time `json:"at"`
	// Replicas is how many orchestrators this one counts as sharing the
	// fleet-wide per-key limits (itself included).
	Replicas int `json:"replicas"`
	// Tools are the tools with calls waiting or in flight, or served
	// recently, sorted by name.
	Tools []ToolStats `json:"tools"`
}

// ToolStats is one tool in a Snapshot.
type ToolStats struct {
	Tool string `json:"tool"`
	// Slots is the fleet's slots for the tool as last looked up
	// (dispatch.ToolInfo.Slots); Window is how many calls this scheduler
	// lets be in flight at once (0: no window).
	Slots  int `json:"slots"`
	Window int `json:"window"`
	// InFlight are calls published and not yet answered (queued in
	// JetStream or running); Waiting are calls held by the scheduler for
	// their turn; Limited are calls held because their key is at its
	// concurrency cap or out of rate.
	InFlight int `json:"in_flight"`
	Waiting  int `json:"waiting"`
	Limited  int `json:"limited"`
	// Limits are the tool's per-key limits, as this scheduler applies
	// them (its share when Replicas > 1).
	Limits Limits `json:"limits"`
	// Keys are the tool's fairness keys with calls waiting or in flight,
	// or served recently: at most a bound of them (busiest first), the
	// rest summed under OtherKey.
	Keys []KeyStats `json:"keys"`
}

// KeyStats is one fairness key of a tool in a Snapshot.
type KeyStats struct {
	// Key is the fairness key (OtherKey for the sum of the rest); Tenant
	// is the tenant it belongs to.
	Key    string `json:"key"`
	Tenant string `json:"tenant"`
	Weight int    `json:"weight"`
	// InFlight, Waiting and Limited are as in ToolStats, for this key.
	InFlight int `json:"in_flight"`
	Waiting  int `json:"waiting"`
	Limited  int `json:"limited"`
	// Served counts the key's calls published since the scheduler
	// started; PerSecond is its recent rate.
	Served    uint64  `json:"served"`
	PerSecond float64 `json:"per_second"`
	// ByPriority counts the key's waiting calls by priority name ("high",
	// "normal", "low"), only those with any.
	ByPriority map[string]int `json:"by_priority,omitempty"`
}

// Limits are the per-key limits a scheduler applies to a tool.
type Limits struct {
	// Concurrency caps a key's calls in flight; 0: no cap.
	Concurrency int `json:"concurrency,omitempty"`
	// Rate calls per Per, with Burst at once; Rate 0: no rate limit.
	Rate  float64       `json:"rate,omitempty"`
	Per   time.Duration `json:"per_ns,omitempty"`
	Burst int           `json:"burst,omitempty"`
}
