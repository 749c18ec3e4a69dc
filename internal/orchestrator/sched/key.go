package sched

import "math"

// park states of a key: why it takes no grants now.
const (
	parkedNot uint8 = iota
	parkedCap
	parkedRate
)

type keyID struct{ tenant, key string }

// keyState is one fairness key of a tool.
type keyState struct {
	id       keyID
	weight   int
	inFlight int
	waiting  int
	queue    [levels]struct{ head, tail *Ticket }
	deficit  [levels]int
	// The key's place in its levels' active rings (keys with waiting
	// calls that may take a grant).
	active     [levels]bool
	prev, next [levels]*keyState

	parked   uint8
	parkedAt int64 // nanotime when rate-parked keys have a token again
	tokens   float64
	filled   int64 // nanotime of the last refill

	enqueued     uint64 // tickets queued so far: their seq
	served       uint64
	secStart     int64 // nanotime of the current second of cur
	cur, prev1   uint32
	lastActive   int64
	waitingLevel [levels]int
}

func (s *Scheduler) key(t *toolState, req *Request, now int64) *keyState {
	id := keyID{req.Tenant, req.Key}
	k := t.keys[id]
	if k == nil {
		k = &keyState{id: id, filled: now, tokens: float64(t.limits.Burst)}
		t.keys[id] = k
	}
	k.weight = max(req.Weight, 1)
	k.lastActive = now
	return k
}

// check parks k if it may not take a grant now, and reports whether it
// may. t.mu is held.
func (s *Scheduler) check(t *toolState, k *keyState, now int64) bool {
	if k.parked != parkedNot {
		return false
	}
	if c := t.limits.Concurrency; c > 0 && k.inFlight >= c {
		s.park(t, k, parkedCap, 0)
		return false
	}
	if t.limits.Rate > 0 {
		s.refill(t, k, now)
		if k.tokens < 1 {
			s.park(t, k, parkedRate, now+s.untilToken(t, k))
			return false
		}
	}
	return true
}

// untilToken is how long until k has a whole token.
func (s *Scheduler) untilToken(t *toolState, k *keyState) int64 {
	perNs := t.limits.Rate / float64(t.limits.Per)
	return int64(math.Ceil((1 - k.tokens) / perNs))
}

func (s *Scheduler) refill(t *toolState, k *keyState, now int64) {
	if dt := now - k.filled; dt > 0 {
		k.tokens = min(k.tokens+float64(dt)*t.limits.Rate/float64(t.limits.Per), float64(t.limits.Burst))
	}
	k.filled = now
}

func (s *Scheduler) enqueue(t *toolState, k *keyState, tk *Ticket) {
	q := &k.queue[tk.level]
	k.enqueued++
	tk.seq = k.enqueued
	tk.prev = q.tail
	if q.tail != nil {
		q.tail.next = tk
	} else {
		q.head = tk
	}
	q.tail = tk
	k.waiting++
	k.waitingLevel[tk.level]++
	t.waiting++
	if k.parked == parkedNot && !k.active[tk.level] {
		t.activate(k, tk.level)
	}
}

func (s *Scheduler) dequeue(t *toolState, k *keyState, tk *Ticket) {
	q := &k.queue[tk.level]
	if tk.prev != nil {
		tk.prev.next = tk.next
	} else {
		q.head = tk.next
	}
	if tk.next != nil {
		tk.next.prev = tk.prev
	} else {
		q.tail = tk.prev
	}
	tk.prev, tk.next = nil, nil
	k.waiting--
	k.waitingLevel[tk.level]--
	t.waiting--
	if q.head == nil && k.active[tk.level] {
		t.deactivate(k, tk.level)
	}
}

// park takes k out of the active rings: it takes no grant until unpark.
func (s *Scheduler) park(t *toolState, k *keyState, why uint8, until int64) {
	k.parked = why
	for l := range int8(levels) {
		if k.active[l] {
			t.deactivate(k, l)
		}
	}
	if why == parkedRate {
		k.parkedAt = until
		s.timers.add(t, k, until)
	}
}

// unpark puts k back in the active rings of the levels it has calls
// waiting in.
func (s *Scheduler) unpark(t *toolState, k *keyState) {
	k.parked = parkedNot
	for l := range int8(levels) {
		if k.queue[l].head != nil && !k.active[l] {
			t.activate(k, l)
		}
	}
}

// sweep forgets the keys idle for IdleKeyTTL whose token bucket is full.
// t.mu is held.
func (s *Scheduler) sweep(t *toolState, now int64) {
	for id, k := range t.keys {
		if k.waiting > 0 || k.inFlight > 0 || now-k.lastActive < int64(IdleKeyTTL) || k.parked != parkedNot {
			continue
		}
		if t.limits.Rate > 0 {
			s.refill(t, k, now)
			if k.tokens < float64(t.limits.Burst) {
				continue
			}
		}
		delete(t.keys, id)
	}
}
