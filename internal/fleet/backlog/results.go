package backlog

import (
	"math"
	"sync"
	"time"
)

// Bounds of what the results counter keeps.
const (
	slotsKept    = 3 // the slot being counted and the two before
	toolsCounted = 4 * MaxToolsPerSample
	maxClasses   = 32 // error classes per tool and slot (the taxonomy has a handful)
)

// The execution times' histogram: histPerDoubling buckets per doubling
// from 1µs, histBuckets in all (up to about 12 days); a percentile is
// read as its bucket's upper bound, within 19 %.
const (
	histPerDoubling = 4
	histBuckets     = 160
)

// histogram counts execution times per bucket.
type histogram [histBuckets]uint32

// bucketOf returns the bucket of d.
func bucketOf(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us <= 1 {
		return 0
	}
	return min(int(math.Ceil(math.Log2(us)*histPerDoubling)), histBuckets-1)
}

// bucketTop is the upper bound of bucket b.
func bucketTop(b int) time.Duration {
	return time.Duration(math.Exp2(float64(b)/histPerDoubling) * float64(time.Microsecond)).Round(time.Microsecond)
}

// slotCounts is one tool's results in one slot.
type slotCounts struct {
	total   int
	byClass []classCount // failed results by class
	exec    histogram
}

// classCount is the failed results of one class.
type classCount struct {
	class string
	n     int
}

// slot is every tool's results in one slot.
type slot struct {
	start time.Time
	tools map[string]*slotCounts
}

// results counts this orchestrator's results (those that reached its
// callers) per slot and tool, and remembers when each tool last answered.
// Every replica counts its own; the history sums them.
type results struct {
	every time.Duration

	mu      sync.Mutex
	slots   [slotsKept]slot
	lastRes map[string]*time.Time
}

func newResults(every time.Duration) *results {
	return &results{every: every, lastRes: map[string]*time.Time{}}
}

// add counts one result of tool at now: class is empty on success. It
// allocates nothing but for a tool's first result in a slot.
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
		c.addClass(class)
	}
	if exec > 0 {
		c.exec[bucketOf(exec)]++
	}
	if last := r.lastRes[tool]; last != nil {
		*last = now
	} else if len(r.lastRes) < toolsCounted {
		at := now
		r.lastRes[tool] = &at
	}
}

// addClass counts a failed result of class.
func (c *slotCounts) addClass(class string) {
	for i := range c.byClass {
		if c.byClass[i].class == class {
			c.byClass[i].n++
			return
		}
	}
	if len(c.byClass) < maxClasses {
		c.byClass = append(c.byClass, classCount{class, 1})
	}
}

// take returns the results of the slot starting at start, per tool.
func (r *results) take(start time.Time) map[string]wireRates {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]wireRates{}
	s := r.slots[(start.UnixNano()/int64(r.every))%slotsKept]
	if !s.start.Equal(start) {
		return out
	}
	for tool, c := range s.tools {
		w := wireRates{Results: c.total}
		for _, cc := range c.byClass {
			if w.Errors == nil {
				w.Errors = map[string]int{}
			}
			w.Errors[cc.class] = cc.n
		}
		for b, n := range c.exec {
			if n > 0 {
				w.Exec = append(w.Exec, [2]uint32{uint32(b), n})
			}
		}
		out[tool] = w
	}
	return out
}

// lastResult returns when tool last answered (zero: not since the start).
func (r *results) lastResult(tool string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if last := r.lastRes[tool]; last != nil {
		return *last
	}
	return time.Time{}
}

// percentiles returns the p50 and p99 of a histogram (sparse: bucket,
// count), 0 when it is empty.
func percentiles(h map[int]uint32) (p50, p99 time.Duration) {
	var total uint64
	top := 0
	for b, n := range h {
		total += uint64(n)
		top = max(top, b)
	}
	if total == 0 {
		return 0, 0
	}
	var seen uint64
	for b := 0; b <= top; b++ {
		seen += uint64(h[b])
		if p50 == 0 && seen*100 >= total*50 {
			p50 = bucketTop(b)
		}
		if seen*100 >= total*99 {
			return p50, bucketTop(b)
		}
	}
	return p50, bucketTop(top)
}
