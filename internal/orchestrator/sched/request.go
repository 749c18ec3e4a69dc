package sched

// Priority orders a tool's waiting calls: every waiting call of a higher
// priority is granted before any of a lower one. The values are those of
// dispatch.Priority.
type Priority int8

// The priorities.
const (
	Low    Priority = -1
	Normal Priority = 0
	High   Priority = 1
)

// levels are the priorities, highest first: level 0 is High.
const levels = 3

func (p Priority) level() int8 {
	switch {
	case p > Normal:
		return 0
	case p < Normal:
		return 2
	}
	return 1
}

var levelNames = [levels]string{"high", "normal", "low"}

// Notifier is told of the grant of a ticket that waited. Granted is
// called with the scheduler's lock of the ticket's tool held: it must
// not block and must not call the scheduler (a non-blocking send on a
// channel with room for every ticket of the caller is the intended
// implementation).
type Notifier interface {
	// Granted tells of the grant of a ticket that waited.
	Granted(*Ticket)
}

// Request is one call asking for its turn.
type Request struct {
	// Tool is the tool called; Key its fairness key within Tenant.
	Tool, Key, Tenant string
	// Weight is the key's share of the tool's free slots relative to a
	// key of weight 1; below 1 counts as 1.
	Weight int
	// Priority of the call.
	Priority Priority
	// Slots are the fleet's slots for the tool (0: not known: no window).
	Slots int
	// Limits are the tool's fleet-wide per-key limits; the scheduler
	// applies its replica's share of them (SetReplicas).
	Limits Limits
	// Index is the caller's number for the call (Ticket.Index).
	Index int
	// Notify is told when a ticket that waited is granted.
	Notify Notifier
}
