package sched

// ticket states.
const (
	ticketWaiting uint8 = iota
	ticketGranted
	ticketDone
)

// Ticket is one call's place in the scheduler, from Acquire until
// Release (granted) or Cancel (still waiting).
type Ticket struct {
	tool       *toolState
	key        *keyState
	notify     Notifier
	prev, next *Ticket // the key's FIFO of its level; once granted, the tool's list of grants
	index      int
	seq        uint64 // its place in its key's queue: ahead of it are about seq - head.seq
	since      int64  // nanotime of Acquire
	granted    int64  // nanotime of the grant
	level      int8
	state      uint8
	listed     bool // in the tool's list of grants (its window counts it)
	stale      bool // granted so long ago that the window no longer counts it
}

// Index is Request.Index.
func (tk *Ticket) Index() int { return tk.index }
