package sched

import (
	"sync"
	"time"
)

// timers wakes the keys parked for rate when they have a token again.
type timers struct {
	s       *Scheduler
	mu      sync.Mutex
	due     []timerEntry
	armedAt int64 // 0: not armed
	stop    func() bool
	closed  bool
}

type timerEntry struct {
	t  *toolState
	k  *keyState
	at int64
}

// add asks for a wake-up of k at at (k nil: of t, to look for stale
// grants). Called with t.mu held.
func (tm *timers) add(t *toolState, k *keyState, at int64) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if tm.closed {
		return
	}
	tm.due = append(tm.due, timerEntry{t, k, at})
	if tm.armedAt != 0 && tm.armedAt <= at {
		return
	}
	if tm.stop != nil {
		tm.stop()
	}
	tm.armedAt = at
	tm.stop = tm.s.cfg.Clock.AfterFunc(time.Duration(at-tm.s.nanotime()), tm.fire)
}

func (tm *timers) fire() {
	s := tm.s
	tm.mu.Lock()
	now := s.nanotime()
	var ready []timerEntry
	keep := tm.due[:0]
	next := int64(0)
	for _, e := range tm.due {
		if e.at <= now {
			ready = append(ready, e)
			continue
		}
		keep = append(keep, e)
		if next == 0 || e.at < next {
			next = e.at
		}
	}
	clear(tm.due[len(keep):])
	tm.due = keep
	tm.armedAt, tm.stop = 0, nil
	if next != 0 && !tm.closed {
		tm.armedAt = next
		tm.stop = s.cfg.Clock.AfterFunc(time.Duration(next-now), tm.fire)
	}
	tm.mu.Unlock()
	for _, e := range ready {
		t := e.t
		t.mu.Lock()
		k := e.k
		if k == nil { // the oldest grant goes stale
			t.staleArmed = false
			s.expireStale(t, now)
			s.pump(t, now)
			s.watchStale(t)
		} else if k.parked == parkedRate && k.parkedAt <= now && t.keys[k.id] == k {
			s.unpark(t, k)
			if s.check(t, k, now) {
				s.pump(t, now)
			}
		}
		t.mu.Unlock()
	}
}

func (tm *timers) close() {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.closed = true
	if tm.stop != nil {
		tm.stop()
		tm.stop = nil
	}
	tm.due = nil
}
