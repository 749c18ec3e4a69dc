package backlog

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// Bounds of what the results counter keeps.
const (
	execSamplesPerSlot = 1024 // execution times per tool and slot, for p50/p99
	slotsKept          = 3    // the slot being counted and the two before
	toolsCounted       = 4 * MaxToolsPerSample
)

// slotCounts is one tool's results in one slot.
type slotCounts struct {
	total   int
	byClass map[string]int // failed results by class
	exec    []time.Duration
	seen    int // results with an execution time, for the reservoir
}

// slot is every tool's results in one slot.
type slot struct {
	start time.Time
	tools map[string]*slotCounts
}

// results counts the fleet's results (tools.result.>, every
// orchestrator's) per slot and tool, and remembers when each tool last
// answered.
type results struct {
	every time.Duration

	mu      sync.Mutex
	since   time.Time // when counting began
	slots   [slotsKept]slot
	lastRes map[string]time.Time
	rnd     uint64 // the reservoir's pseudo-random state
}

func newResults(every time.Duration) *results {
	return &results{every: every, lastRes: map[string]time.Time{}, rnd: 0x9E3779B97F4A7C15}
}

// onMsg counts one result message.
func (r *results) onMsg(m *nats.Msg) {
	res, err := envelope.DecodeResult(m.Data)
	if err != nil || res.Tool == "" {
		return
	}
	r.add(time.Now(), res.Tool, string(res.Class), res.ExecTime)
}

// add counts one result of tool at now: class is empty on success.
func (r *results) add(now time.Time, tool, class string, exec time.Duration) {
	start := now.Truncate(r.every)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.slots[(start.UnixNano()/int64(r.every))%slotsKept]
	if !s.start.Equal(start) {
		*s = slot{start: start, tools: map[string]*slotCounts{}}
	}
	c := s.tools[tool]
	if c == nil {
		if len(s.tools) >= toolsCounted {
			return
		}
		c = &slotCounts{}
		s.tools[tool] = c
	}
	c.total++
	if class != "" {
		if c.byClass == nil {
			c.byClass = map[string]int{}
		}
		if len(c.byClass) < 32 {
			c.byClass[class]++
		}
	}
	if exec > 0 {
		c.seen++
		if len(c.exec) < execSamplesPerSlot {
			c.exec = append(c.exec, exec)
		} else if j := r.next() % uint64(c.seen); j < execSamplesPerSlot {
			c.exec[j] = exec // a uniform sample of the slot's times
		}
	}
	if _, ok := r.lastRes[tool]; ok || len(r.lastRes) < toolsCounted {
		r.lastRes[tool] = now
	}
}

// next is a xorshift step: the reservoir needs no better randomness.
func (r *results) next() uint64 {
	x := r.rnd
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	r.rnd = x
	return x
}

// start marks the beginning of counting.
func (r *results) start(now time.Time) {
	r.mu.Lock()
	r.since = now
	r.mu.Unlock()
}

// slotRates are one tool's results in a slot, as a sample carries them.
type slotRates struct {
	total   int
	byClass map[string]int
	exec    []time.Duration
}

// take returns the results of the slot starting at start, per tool, and
// whether the slot was counted whole (counting began before it).
func (r *results) take(start time.Time) (map[string]slotRates, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	whole := !r.since.IsZero() && !r.since.After(start)
	out := map[string]slotRates{}
	s := r.slots[(start.UnixNano()/int64(r.every))%slotsKept]
	if !s.start.Equal(start) {
		return out, whole
	}
	for tool, c := range s.tools {
		out[tool] = slotRates{total: c.total, byClass: maps.Clone(c.byClass), exec: slices.Clone(c.exec)}
	}
	return out, whole
}

// lastResult returns when tool last answered (zero: not since counting
// began).
func (r *results) lastResult(tool string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastRes[tool]
}

// percentiles returns the p50 and p99 of d (sorted in place).
func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	n := len(d)
	if n == 0 {
		return 0, 0
	}
	slices.Sort(d)
	return d[(n-1)*50/100], d[(n-1)*99/100]
}
