package sched

import (
	"math"
	"sync"
	"time"
)

type ring struct{ head, tail *keyState }

// toolState is one tool's calls.
type toolState struct {
	mu       sync.Mutex
	name     string
	slots    int
	window   int
	raw      Limits // fleet-wide, normalized
	limits   Limits // this replica's share
	repGen   uint64
	inFlight int
	waiting  int
	active   [levels]ring
	keys     map[keyID]*keyState
	holdEWMA float64 // ns a granted call stays in flight
	ops      int
	busyKeys int // keys with calls waiting or in flight
	// grants lists the calls granted under a window, oldest first, until
	// they are released or go stale (StaleFactor); stale counts those.
	grants     struct{ head, tail *Ticket }
	stale      int
	staleArmed bool // a timer will look for stale grants
}

func (s *Scheduler) tool(name string) *toolState {
	s.mu.RLock()
	t := s.tools[name]
	s.mu.RUnlock()
	if t != nil {
		return t
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t = s.tools[name]; t == nil {
		t = &toolState{name: name, keys: map[keyID]*keyState{}, repGen: math.MaxUint64}
		s.tools[name] = t
	}
	return t
}

// refresh applies a tool's slots and limits as a request brings them, and
// the replica share; changed says the caller must pump. t.mu is held.
func (s *Scheduler) refresh(t *toolState, slots int, raw Limits, now int64) (changed bool) {
	gen := s.repGen.Load()
	if slots == t.slots && raw == t.raw && gen == t.repGen {
		return false
	}
	t.slots, t.window = slots, s.Window(slots)
	t.raw, t.repGen = raw, gen
	replicas, rank := s.Replicas()
	old := t.limits
	t.limits = Share(raw, replicas, rank)
	if old == t.limits {
		return true
	}
	// Re-examine every key under the new limits.
	for _, k := range t.keys {
		if t.limits.Rate > 0 {
			s.refill(t, k, now)
			k.tokens = min(k.tokens, float64(t.limits.Burst))
		}
		if k.parked != parkedNot {
			s.unpark(t, k)
		}
		s.check(t, k, now)
	}
	return true
}

// room reports whether the tool's window lets another call go.
func (t *toolState) room() bool { return t.window == 0 || t.inFlight-t.stale < t.window }

// staleAfter is how long after its grant a call goes stale.
func (t *toolState) staleAfter(min time.Duration) int64 {
	if t.holdEWMA == 0 {
		return int64(10 * min)
	}
	return max(int64(StaleFactor*t.holdEWMA), int64(min))
}

func (t *toolState) list(tk *Ticket) {
	tk.listed, tk.prev, tk.next = true, t.grants.tail, nil
	if t.grants.tail != nil {
		t.grants.tail.next = tk
	} else {
		t.grants.head = tk
	}
	t.grants.tail = tk
}

func (t *toolState) unlist(tk *Ticket) {
	if tk.prev != nil {
		tk.prev.next = tk.next
	} else {
		t.grants.head = tk.next
	}
	if tk.next != nil {
		tk.next.prev = tk.prev
	} else {
		t.grants.tail = tk.prev
	}
	tk.listed, tk.prev, tk.next = false, nil, nil
}

// expireStale takes the grants older than staleAfter out of the window's
// count. t.mu is held.
func (s *Scheduler) expireStale(t *toolState, now int64) {
	if s.cfg.StaleMin < 0 {
		return
	}
	cutoff := now - t.staleAfter(s.cfg.StaleMin)
	for tk := t.grants.head; tk != nil && tk.granted <= cutoff; tk = t.grants.head {
		t.unlist(tk)
		tk.stale = true
		t.stale++
	}
}

// watchStale arms a timer for when the oldest grant goes stale, while
// calls wait for a full window. t.mu is held.
func (s *Scheduler) watchStale(t *toolState) {
	if t.staleArmed || t.waiting == 0 || t.room() || t.grants.head == nil || s.cfg.StaleMin < 0 {
		return
	}
	t.staleArmed = true
	s.timers.add(t, nil, t.grants.head.granted+t.staleAfter(s.cfg.StaleMin))
}

func (t *toolState) activate(k *keyState, l int8) {
	r := &t.active[l]
	k.active[l], k.deficit[l] = true, 0
	k.prev[l], k.next[l] = r.tail, nil
	if r.tail != nil {
		r.tail.next[l] = k
	} else {
		r.head = k
	}
	r.tail = k
}

func (t *toolState) deactivate(k *keyState, l int8) {
	r := &t.active[l]
	if k.prev[l] != nil {
		k.prev[l].next[l] = k.next[l]
	} else {
		r.head = k.next[l]
	}
	if k.next[l] != nil {
		k.next[l].prev[l] = k.prev[l]
	} else {
		r.tail = k.prev[l]
	}
	k.prev[l], k.next[l] = nil, nil
	k.active[l], k.deficit[l] = false, 0
}

// grant lets tk go. t.mu is held.
func (s *Scheduler) grant(t *toolState, tk *Ticket, now int64) {
	k := tk.key
	tk.state, tk.granted = ticketGranted, now
	if t.window > 0 {
		t.list(tk)
	}
	t.inFlight++
	k.inFlight++
	k.served++
	k.lastActive = now
	if d := now - k.secStart; d >= int64(time.Second) {
		if d < 2*int64(time.Second) {
			k.prev1 = k.cur
		} else {
			k.prev1 = 0
		}
		k.cur, k.secStart = 0, now-d%int64(time.Second)
	}
	k.cur++
	if t.limits.Rate > 0 {
		k.tokens--
	}
	if (t.limits.Concurrency > 0 && k.inFlight >= t.limits.Concurrency) || (t.limits.Rate > 0 && k.tokens < 1) {
		s.check(t, k, now)
	}
}

// pump grants waiting calls while the window has room. t.mu is held.
func (s *Scheduler) pump(t *toolState, now int64) {
	for t.room() {
		tk := t.next()
		if tk == nil {
			return
		}
		s.dequeue(t, tk.key, tk)
		s.grant(t, tk, now)
		if tk.notify != nil {
			tk.notify.Granted(tk)
		}
	}
}

// next is the next ticket to grant: the highest level with an active key;
// in it, deficit round robin (a key at the head of the ring gets its
// weight in grants, then goes to the tail). nil when none may go.
func (t *toolState) next() *Ticket {
	for l := range int8(levels) {
		k := t.active[l].head
		if k == nil {
			continue
		}
		if k.deficit[l] <= 0 {
			k.deficit[l] = k.weight
		}
		tk := k.queue[l].head
		k.deficit[l]--
		if k.deficit[l] == 0 && k.next[l] != nil {
			// Its quantum is spent: to the tail, with a new one when it
			// comes back to the head.
			t.deactivate(k, l)
			t.activate(k, l)
		}
		return tk
	}
	return nil
}
