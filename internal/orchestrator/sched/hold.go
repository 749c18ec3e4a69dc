package sched

import "time"

// HoldReason says why a ticket waited.
type HoldReason uint8

// The reasons a ticket waits.
const (
	// HeldByFairShare: the tool's window was full (its workers busy) and
	// other keys' calls, or the key's own earlier ones, had their turn.
	HeldByFairShare HoldReason = iota + 1
	// HeldByConcurrency: the key had its concurrency cap of calls in
	// flight.
	HeldByConcurrency
	// HeldByRate: the key had used its rate.
	HeldByRate
)

// Hold is why a cancelled ticket waited, for the words the model reads.
type Hold struct {
	// Reason is the limit that held the ticket.
	Reason HoldReason
	// Limits are the tool's fleet-wide per-key limits (not this
	// replica's share): what the model is told.
	Limits Limits
	// Waited is how long the ticket waited.
	Waited time.Duration
	// RetryAfter is when a new call of the key would likely pass.
	RetryAfter time.Duration
}

// Cancel ends a ticket that waits: it leaves its queue. It returns why
// it waited; granted reports that it was granted meanwhile instead (its
// notification may be on its way): then the caller must Release it.
func (s *Scheduler) Cancel(tk *Ticket) (h Hold, granted bool) {
	t := tk.tool
	t.mu.Lock()
	defer t.mu.Unlock()
	switch tk.state {
	case ticketGranted:
		return Hold{}, true
	case ticketDone:
		return Hold{}, false
	}
	now := s.nanotime()
	h = s.hold(t, tk, now)
	k := tk.key
	s.dequeue(t, k, tk)
	tk.state = ticketDone
	if k.waiting+k.inFlight == 0 {
		t.busyKeys--
	}
	return h, false
}

// hold says why tk waits. t.mu is held.
func (s *Scheduler) hold(t *toolState, tk *Ticket, now int64) Hold {
	k := tk.key
	h := Hold{Limits: t.raw, Waited: time.Duration(now - tk.since)}
	// Calls of the key ahead of tk, tk included: those of higher levels,
	// and of its own those queued before it (from the sequence numbers,
	// not a walk of the queue: a backlog expiring at once would make that
	// quadratic).
	ahead := 1
	for l := range tk.level {
		ahead += k.waitingLevel[l]
	}
	if head := k.queue[tk.level].head; head != nil {
		ahead += min(int(tk.seq-head.seq), k.waitingLevel[tk.level]-1)
	}
	run := time.Duration(t.holdEWMA)
	switch k.parked {
	case parkedCap:
		h.Reason = HeldByConcurrency
		c := max(t.limits.Concurrency, 1)
		h.RetryAfter = run * time.Duration((ahead+c-1)/c)
	case parkedRate:
		h.Reason = HeldByRate
		until := time.Duration(max(k.parkedAt-now, 0))
		h.RetryAfter = until + time.Duration(float64(ahead-1)*float64(t.limits.Per)/t.limits.Rate)
	default:
		h.Reason = HeldByFairShare
		w := max(t.window, 1)
		h.RetryAfter = run * time.Duration((t.waiting+w-1)/w)
	}
	h.RetryAfter = max(h.RetryAfter, time.Second)
	return h
}
