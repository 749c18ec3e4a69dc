package backlog

import "time"

// State is a tool's backlog judged: ok, backing up or stalled.
type State string

// The states of a backlog, worst last.
const (
	// StateOK: the queue moves and its oldest call is younger than the
	// threshold (Config.BacklogAge).
	StateOK State = "ok"
	// StateBackingUp: the oldest queued call waited longer than the
	// threshold.
	StateBackingUp State = "backing_up"
	// StateStalled: calls are queued and nothing takes them: no live
	// worker serves the tool, the tool is paused, or nothing was
	// delivered or answered for Config.StallAfter.
	StateStalled State = "stalled"
)

// States are the states in order, best first (the metrics' label values).
var States = []State{StateOK, StateBackingUp, StateStalled}

// rank orders the states, best first.
func (s State) rank() int {
	switch s {
	case StateStalled:
		return 2
	case StateBackingUp:
		return 1
	}
	return 0
}

// Worse returns the worse of s and o.
func (s State) Worse(o State) State {
	if o.rank() > s.rank() {
		return o
	}
	if s == "" {
		return StateOK
	}
	return s
}

// ToolBacklog is one tool's queue, fleet-wide, as read at At.
type ToolBacklog struct {
	Tool string `json:"tool"`
	// At is when it was read.
	At time.Time `json:"at"`
	// Queued is the calls in TOOL_CALLS not yet delivered to any worker.
	Queued uint64 `json:"queued"`
	// Running is the calls delivered and not acknowledged: running, or
	// waiting for their retry.
	Running int `json:"running"`
	// Waiting is the calls the orchestrators' schedulers hold before
	// publishing them (the sum over the replicas that answered).
	Waiting int `json:"waiting"`
	// OldestAge is the age of the oldest queued (undelivered) call; 0
	// when none is queued.
	OldestAge time.Duration `json:"oldest_age_ns"`
	// Workers is the live workers serving the tool; -1 when unknown (the
	// monitor has no live catalog).
	Workers int `json:"workers"`
	// PausedUntil is set while the tool's consumer is paused.
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	// State is the backlog judged, and Reason why it is not ok (one
	// sentence; empty when ok).
	State  State  `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Draining says the backlog shrank over the last minute, or nothing
	// is queued. Drain is then the estimated time until Queued is 0 (0
	// when nothing is queued); it means nothing when Draining is false.
	Draining bool          `json:"draining"`
	Drain    time.Duration `json:"drain_ns,omitempty"`
}

// SampleEvery is the history's resolution: one sample per slot of this
// length, aligned to its multiples (Config.SampleEvery).
const SampleEvery = 10 * time.Second

// MaxToolsPerSample bounds a sample: the tools beyond it (the least busy)
// are left out and counted in Sample.Truncated.
const MaxToolsPerSample = 200

// Sample is the fleet's state in one slot of the history: every
// orchestrator's results in the slot summed, and the backlog at its end.
type Sample struct {
	// At is the slot's start (a multiple of SampleEvery, UTC). The rates
	// are over the slot; the backlog is as read at its end.
	At time.Time `json:"at"`
	// Instances are the orchestrators whose samples it sums (each
	// writes its own results; the backlog is the first one's reading).
	Instances []string `json:"instances"`
	// Pool is every tool summed (Tool is ""): the rates and the backlog
	// added up, P50/P99 over every result, OldestAge the largest, State
	// the worst.
	Pool ToolSample `json:"pool"`
	// Tools are the tools, sorted by name, at most MaxToolsPerSample.
	Tools []ToolSample `json:"tools"`
	// Truncated is how many tools were left out.
	Truncated int `json:"truncated,omitempty"`
}

// ToolSample is one tool (or the pool) in one slot.
type ToolSample struct {
	Tool string `json:"tool,omitempty"`
	// CallsPerSec is the results per second in the slot, every class
	// (successes included).
	CallsPerSec float64 `json:"calls_per_sec"`
	// ErrorsPerSec is the failed results per second by error class;
	// nil when none failed.
	ErrorsPerSec map[string]float64 `json:"errors_per_sec,omitempty"`
	// P50 and P99 are the workers' execution times of the slot's
	// results (read from a histogram: within 19 %, rounded up); 0 when
	// there were none.
	P50 time.Duration `json:"p50_ns,omitempty"`
	P99 time.Duration `json:"p99_ns,omitempty"`
	// Queued, Running, Waiting and OldestAge are as in ToolBacklog.
	Queued    uint64        `json:"queued"`
	Running   int           `json:"running"`
	Waiting   int           `json:"waiting"`
	OldestAge time.Duration `json:"oldest_age_ns,omitempty"`
	State     State         `json:"state"`
}
