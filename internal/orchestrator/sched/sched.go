package sched

import (
	"cmp"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config.
const (
	// MarginDefault is the window's margin over the tool's slots, as a
	// fraction of them: with 64 slots the window is 80 calls, so the
	// workers find the next calls queued when a slot frees while
	// JetStream holds only about the next round.
	MarginDefault = 0.25
	// MinMarginDefault is the least margin, in calls, of a tool's window.
	MinMarginDefault = 4
	// MaxKeysDefault bounds the keys of one tool in a Snapshot.
	MaxKeysDefault = 20
	// IdleKeyTTL is how long a key with nothing waiting or in flight is
	// kept (its served count, its rate, its token bucket) before the
	// scheduler forgets it.
	IdleKeyTTL = time.Minute
	// StaleFactor and StaleMinDefault say when a call granted long ago
	// stops counting against its tool's window (it still counts against
	// its key's cap): after StaleFactor times the tool's average time from
	// grant to release, at least Config.StaleMin (ten times that before
	// any call of the tool was released). Such a call is most likely
	// waiting out a retry's backoff in JetStream, taking no worker's slot;
	// counting it would leave the workers idle while the window holds
	// calls that cannot run.
	StaleFactor     = 4
	StaleMinDefault = 100 * time.Millisecond
)

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

// Clock is the scheduler's time: Now, and a timer for keys out of rate.
// The default is the system clock; tests inject their own.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d; stop prevents that
	// if it has not happened yet.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// Config configures a Scheduler. The zero value takes every default.
type Config struct {
	// Margin is a tool's window over its slots, as a fraction of the
	// slots (at least MinMargin calls). Default MarginDefault; negative:
	// no margin (the window is the slots).
	Margin float64
	// MinMargin is the least margin of a window, in calls. Default
	// MinMarginDefault; negative: none.
	MinMargin int
	// MaxKeys bounds the keys listed per tool in a Snapshot; the rest are
	// summed under OtherKey. Default MaxKeysDefault.
	MaxKeys int
	// StaleMin is the least time after its grant a call goes stale (see
	// StaleFactor). Default StaleMinDefault; negative: grants never go
	// stale.
	StaleMin time.Duration
	// Clock is the scheduler's time. Default the system clock.
	Clock Clock
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Margin = cmp.Or(c.Margin, MarginDefault)
	c.MinMargin = cmp.Or(c.MinMargin, MinMarginDefault)
	c.MaxKeys = cmp.Or(c.MaxKeys, MaxKeysDefault)
	c.StaleMin = cmp.Or(c.StaleMin, StaleMinDefault)
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	return c
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case math.IsNaN(c.Margin) || math.IsInf(c.Margin, 0):
		return errors.New("sched: Config.Margin must be a finite number")
	case c.MaxKeys <= 0:
		return errors.New("sched: Config.MaxKeys must be positive")
	case c.Clock == nil:
		return errors.New("sched: Config.Clock is nil")
	}
	return nil
}

// Notifier is told of the grant of a ticket that waited. Granted is
// called with the scheduler's lock of the ticket's tool held: it must
// not block and must not call the scheduler (a non-blocking send on a
// channel with room for every ticket of the caller is the intended
// implementation).
type Notifier interface {
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
	Reason HoldReason
	// Limits are the tool's fleet-wide per-key limits (not this
	// replica's share): what the model is told.
	Limits Limits
	// Waited is how long the ticket waited.
	Waited time.Duration
	// RetryAfter is when a new call of the key would likely pass.
	RetryAfter time.Duration
}

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

// Share is the part of l that replica rank of replicas applies: the cap
// divided among them, the remainder going to the lowest ranks, and at
// least 1 (a cap below the number of replicas is exceeded up to one call
// per replica rather than starve the replicas without a share); the rate
// and the burst divided likewise (the burst at least 1).
func Share(l Limits, replicas, rank int) Limits {
	if replicas <= 1 {
		return l
	}
	split := func(n int) int {
		s := n / replicas
		if rank < n%replicas {
			s++
		}
		return max(s, 1)
	}
	if l.Concurrency > 0 {
		l.Concurrency = split(l.Concurrency)
	}
	if l.Rate > 0 {
		l.Rate /= float64(replicas)
		l.Burst = split(l.Burst)
	}
	return l
}

// normalize fills a rate limit's defaults: Per a second, Burst the rate
// (at least 1).
func normalize(l Limits) Limits {
	l.Concurrency = max(l.Concurrency, 0)
	if l.Rate <= 0 {
		l.Rate, l.Per, l.Burst = 0, 0, 0
		return l
	}
	if l.Per <= 0 {
		l.Per = time.Second
	}
	if l.Burst <= 0 {
		l.Burst = max(int(math.Ceil(l.Rate)), 1)
	}
	return l
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

// Load is what a tool's scheduler holds, and of it one key's part.
type Load struct {
	// Waiting and InFlight are the tool's calls waiting and granted;
	// Window its window (0: none).
	Waiting, InFlight, Window int
	// KeyWaiting and KeyInFlight are the key's.
	KeyWaiting, KeyInFlight int
	// Keys counts the keys with calls waiting or in flight, the key
	// counted even when it has none: the number the tool's slots are
	// shared between.
	Keys int
}

// Load returns what the scheduler holds of tool, and of its key key of
// tenant: what admission control weighs a new call against.
func (s *Scheduler) Load(tool, tenant, key string) Load {
	s.mu.RLock()
	t := s.tools[tool]
	s.mu.RUnlock()
	if t == nil {
		return Load{Keys: 1}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	l := Load{Waiting: t.waiting, InFlight: t.inFlight, Window: t.window, Keys: t.busyKeys}
	if k := t.keys[keyID{tenant, key}]; k != nil && k.waiting+k.inFlight > 0 {
		l.KeyWaiting, l.KeyInFlight = k.waiting, k.inFlight
	} else {
		l.Keys++
	}
	return l
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

// Close stops the scheduler's timer. Tickets may still be released and
// cancelled; keys out of rate are then only looked at again on the next
// release of their tool.
func (s *Scheduler) Close() { s.timers.close() }

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
