package sched

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Scheduler holds the calls of each tool that may not be published yet
// and grants them in order: strict priority, then weighted deficit round
// robin over the fairness keys, FIFO within a key; a tool's window (slots
// plus a margin) bounds its calls in flight, and each key's concurrency
// cap and token bucket bound the key's. It is safe for concurrent use.
type Scheduler struct {
	cfg  Config
	base time.Time

	mu    sync.RWMutex
	tools map[string]*toolState

	replicas atomic.Uint64 // replicas<<32 | rank
	repGen   atomic.Uint64

	timers timers
}

// New returns a Scheduler for cfg, with defaults applied.
func New(cfg Config) (*Scheduler, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{cfg: cfg, tools: map[string]*toolState{}}
	s.base = cfg.Clock.Now()
	s.replicas.Store(1 << 32)
	s.timers.s = s
	return s, nil
}

// nanotime is the scheduler's time: nanoseconds since New.
func (s *Scheduler) nanotime() int64 { return int64(s.cfg.Clock.Now().Sub(s.base)) }

// SetReplicas tells the scheduler how many orchestrators share the
// fleet-wide per-key limits (itself included) and its rank among them
// (0 ≤ rank < replicas): each applies its share (see Share).
func (s *Scheduler) SetReplicas(replicas, rank int) {
	replicas = max(replicas, 1)
	rank = min(max(rank, 0), replicas-1)
	v := uint64(replicas)<<32 | uint64(rank)
	if s.replicas.Swap(v) == v {
		return
	}
	s.repGen.Add(1)
	s.mu.RLock()
	ts := make([]*toolState, 0, len(s.tools))
	for _, t := range s.tools {
		ts = append(ts, t)
	}
	s.mu.RUnlock()
	for _, t := range ts {
		t.mu.Lock()
		now := s.nanotime()
		s.refresh(t, t.slots, t.raw, now)
		s.pump(t, now)
		t.mu.Unlock()
	}
}

// Replicas returns what SetReplicas set (1 and 0 before).
func (s *Scheduler) Replicas() (replicas, rank int) {
	v := s.replicas.Load()
	return int(v >> 32), int(uint32(v))
}

// Window is the number of calls the scheduler lets be in flight for a
// tool of slots slots (0: no window).
func (s *Scheduler) Window(slots int) int {
	if slots <= 0 {
		return 0
	}
	m := 0
	if s.cfg.Margin > 0 {
		m = int(math.Ceil(float64(slots) * s.cfg.Margin))
	}
	return slots + max(m, s.cfg.MinMargin, 0)
}

// Acquire asks for a call's turn. A ticket granted at once (granted) may
// be published now; otherwise the ticket waits and req.Notify is told of
// its grant later. Either way the caller ends it: Release once granted,
// Cancel while waiting.
func (s *Scheduler) Acquire(req Request) (tk *Ticket, granted bool) {
	tk = new(Ticket)
	return tk, s.AcquireTicket(tk, req)
}

// AcquireTicket is Acquire into a ticket the caller holds (a field of its
// own state, saving an allocation). tk is overwritten; it must not be in
// use: a ticket is free again once released, or cancelled while waiting.
func (s *Scheduler) AcquireTicket(tk *Ticket, req Request) (granted bool) {
	t := s.tool(req.Tool)
	*tk = Ticket{tool: t, notify: req.Notify, index: req.Index, level: req.Priority.level()}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := s.nanotime()
	if s.refresh(t, req.Slots, normalize(req.Limits), now) {
		s.pump(t, now)
	}
	k := s.key(t, &req, now)
	tk.key, tk.since = k, now
	if k.waiting+k.inFlight == 0 {
		t.busyKeys++
	}
	if k.parked == parkedNot && !t.room() && t.grants.head != nil {
		s.expireStale(t, now)
	}
	if k.parked == parkedNot && t.room() && s.check(t, k, now) {
		s.grant(t, tk, now)
		return true
	}
	s.enqueue(t, k, tk)
	s.watchStale(t)
	return false
}

// Release ends a granted ticket: its call was answered or abandoned. The
// window and the key's cap get its place back. Releasing a ticket twice,
// or one not granted, does nothing.
func (s *Scheduler) Release(tk *Ticket) {
	t := tk.tool
	t.mu.Lock()
	defer t.mu.Unlock()
	if tk.state != ticketGranted {
		return
	}
	tk.state = ticketDone
	k := tk.key
	t.inFlight--
	k.inFlight--
	if k.waiting+k.inFlight == 0 {
		t.busyKeys--
	}
	stale := tk.stale
	switch {
	case tk.listed:
		t.unlist(tk)
	case stale:
		tk.stale = false
		t.stale--
	}
	t.ops++
	// The clock is the costliest part of an uncontended release: it is
	// read only when something waits, or for one release in eight (the
	// run-time average that retry estimates and staleness use).
	if t.waiting == 0 && k.parked == parkedNot && t.ops%8 != 0 {
		return
	}
	now := s.nanotime()
	if !stale { // a stale call's time says nothing of the tool's run time
		held := float64(now - tk.granted)
		if t.holdEWMA == 0 {
			t.holdEWMA = held
		} else {
			t.holdEWMA += (held - t.holdEWMA) / 8
		}
	}
	if k.parked == parkedCap && k.inFlight < t.limits.Concurrency {
		s.unpark(t, k)
		s.check(t, k, now)
	}
	if t.waiting > 0 && !t.room() {
		s.expireStale(t, now)
	}
	s.pump(t, now)
	s.watchStale(t)
	if t.ops >= 4096 {
		t.ops = 0
		s.sweep(t, now)
	}
}

// Close stops the scheduler's timer. Tickets may still be released and
// cancelled; keys out of rate are then only looked at again on the next
// release of their tool.
func (s *Scheduler) Close() { s.timers.close() }
