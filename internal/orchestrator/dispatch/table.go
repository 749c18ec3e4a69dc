package dispatch

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// The call table is the dispatcher's memory of calls, by call key (see
// envelope.CallKey: scope, id, tool and input), so that only the same call
// coalesces. It is sharded by a hash of the key so that thousands of calls a second from many goroutines
// and the single result-consuming goroutine rarely meet on one mutex; each
// operation on a key takes exactly one shard lock.
//
// A key is in one of three states:
//
//	pending: one or more waiters (Dispatch calls) wait for its result;
//	done:    its result arrived; the result is cached while it fits;
//	gone:    every waiter left before a result came (deadline passed, the
//	         caller cancelled, the turn's publish failed, Stop).
//
// Settled ids (done, gone) are kept in a per-shard FIFO bounded by age and
// count, their cached results in a per-shard ring of bytes. They let the
// table tell a late result (gone) from a duplicate (done) and from an
// unknown key, and let a repeated call be answered from the cache without
// executing the tool again.
//
// The table remembers up to RecentMax settled calls (100,000 by default)
// and RecentMaxBytes of their results: most of what a busy dispatcher
// keeps. So what it keeps of them holds no pointer: the settled map, the
// FIFO and the ring are each one object the garbage collector does not
// scan, whatever their size. Only pending calls, a few thousand at most,
// are objects of their own (callEntry, reused once settled).
const tableShards = 64

type callState uint8

const (
	statePending callState = iota
	stateDone
	stateGone
)

// delivery is a result handed to one waiter: idx is the call's position in
// the waiter's turn. The waiter owns res: no other waiter or cache holds
// it, so the turn takes it as it is, without a copy.
type delivery struct {
	idx int
	res *envelope.Result
}

// arrival is a result as it came: decoded (res, for the call's waiters)
// and encoded (data, which the cache copies; a repeated call decodes its
// own copy).
type arrival struct {
	res  *envelope.Result
	data []byte
}

// waiter is one Dispatch call's interest in an id. ch is the turn's channel,
// buffered for every call of the turn, so a send never blocks. t is the
// turn, for its progress reports (nil in tests).
type waiter struct {
	ch  chan delivery
	idx int
	t   *turn
}

// callEntry is a pending call.
type callEntry struct {
	tool    string
	start   time.Time // when it last became pending
	waiters []waiter
	first   [1]waiter // waiters' room for one, the usual number
	// cancels counts the times the call was cancelled pool-wide: its
	// message in TOOL_CALLS is gone, so the call is published again under
	// a new Nats-Msg-Id (see callMsgID), which JetStream does not drop as a
	// duplicate of the cancelled one.
	cancels uint32
}

// settledKey is a settled call's key, as a map key with no pointer in it:
// the key's bytes and its length. Call keys are envelope.KeyLen long; a
// longer id (a result subject's tail that no call key has) is never
// settled.
type settledKey struct {
	n uint8
	b [envelope.KeyLen]byte
}

// settledKeyOf is id's settledKey; false when id is too long to be one.
func settledKeyOf(id string) (k settledKey, ok bool) {
	if len(id) > len(k.b) {
		return k, false
	}
	k.n = uint8(len(id))
	copy(k.b[:], id)
	return k, true
}

// settledEntry is a settled call (done or gone), with no pointer in it.
type settledEntry struct {
	state   callState
	tool    uint32 // index in the shard's tools
	cancels uint32 // callEntry.cancels
	size    uint32 // the cached result's length; 0: none
	gen     uint64 // matches the FIFO item that may evict the entry
	pos     uint64 // the cached result's position in the shard's ring
	start   int64  // when it last became pending, as a table time (callTable.since)
}

// fifoItem queues a settled entry for eviction, in settling order.
type fifoItem struct {
	key settledKey
	gen uint64
	at  int64 // when it settled, as a table time
}

// maxToolNames bounds the tool names a shard remembers for its settled
// calls; a settled call of a tool beyond them reports no tool for a late
// or duplicate result. A dispatcher only registers calls of its catalog's
// tools, so the bound is for a catalog changing many times.
const maxToolNames = 1 << 16

type tableShard struct {
	mu      sync.Mutex
	calls   map[string]*callEntry // pending
	settled map[settledKey]settledEntry
	fifo    []fifoItem
	head    int
	ring    resultRing
	tools   []string          // the tool names of settled entries, by index; 0 is ""
	toolIdx map[string]uint32 // tools' indexes
	free    []*callEntry      // settled calls' entries, for new pending calls
	gen     uint64
	_       [64]byte // keep neighbouring shards' locks off one cache line
}

type callTable struct {
	ttl      time.Duration
	maxCount int // settled entries per shard
	ringSize int // cached result bytes per shard
	epoch    time.Time
	shards   [tableShards]tableShard
}

func newCallTable(ttl time.Duration, maxSettled int, maxBytes int64) *callTable {
	t := &callTable{
		ttl:      ttl,
		maxCount: max(maxSettled/tableShards, 1),
		ringSize: int(min(max(maxBytes/tableShards, 1), math.MaxUint32)),
		epoch:    time.Now(),
	}
	for i := range t.shards {
		s := &t.shards[i]
		s.calls = make(map[string]*callEntry)
		s.settled = make(map[settledKey]settledEntry)
		s.tools = []string{""}
		s.toolIdx = map[string]uint32{"": 0}
	}
	return t
}

// since is now as a table time: nanoseconds since the table was made
// (monotonic when now is), which holds no pointer as a time.Time does.
func (t *callTable) since(now time.Time) int64 { return int64(now.Sub(t.epoch)) }

// at is the time.Time of a table time.
func (t *callTable) at(tt int64) time.Time { return t.epoch.Add(time.Duration(tt)) }

func (t *callTable) shard(id string) *tableShard {
	// FNV-1a, inline so that hashing does not allocate.
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return &t.shards[h%tableShards]
}

// register adds w as a waiter for id. If id's result is cached it returns it
// (a copy of its own, decoded) instead and registers nothing.
func (t *callTable) register(id, tool string, w waiter, now time.Time) (*envelope.Result, bool) {
	data, ok, _ := t.registerEpoch(id, tool, w, now)
	if !ok {
		return nil, false
	}
	res, err := envelope.DecodeResult(data)
	return res, err == nil
}

// registerEpoch is register that returns the cached result encoded (a copy
// of its own), and how often the call was cancelled pool-wide: its
// publishes use callMsgID(id, epoch).
func (t *callTable) registerEpoch(id, tool string, w waiter, now time.Time) ([]byte, bool, uint32) {
	s := t.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evict(now, t)
	if e := s.calls[id]; e != nil {
		e.waiters = append(e.waiters, w)
		return nil, false, e.cancels
	}
	var cancels uint32
	if k, ok := settledKeyOf(id); ok {
		if se, ok := s.settled[k]; ok {
			if se.state == stateDone && se.size > 0 {
				if data, ok := s.ring.get(se.pos, se.size); ok {
					return slices.Clone(data), true, 0
				}
			}
			// Gone: the call may still be running, and its result will come
			// here. Done with a result not cached (too large, or overwritten
			// in the ring): the caller waits, and gets the deadline answer if
			// the call is not run again.
			delete(s.settled, k) // its FIFO item goes stale
			cancels = se.cancels
		}
	}
	e := s.newEntry()
	e.tool, e.start, e.cancels = tool, now, cancels
	e.first[0] = w
	e.waiters = e.first[:1]
	s.calls[id] = e
	return nil, false, cancels
}

// deliverOutcome says what deliver did with a result.
type deliverOutcome uint8

const (
	outcomeDelivered deliverOutcome = iota // handed to its waiters
	outcomeLate                            // its waiters had left
	outcomeDuplicate                       // the id was already answered
	outcomeUnknown                         // no record of the id
)

// deliver hands a.res to every waiter of the call key: the first waiter
// gets it, each other one a copy, made before any waiter is woken, so that
// every waiter owns what it gets. The cache keeps a copy of a.data when it
// fits. When the call was pending, received (if not nil) is called with
// its tool and start before any waiter is woken, so what it counts is
// counted by the time Dispatch returns. deliver returns the outcome, the
// call's tool and when the call became pending.
func (t *callTable) deliver(key string, a arrival, now time.Time, received func(tool string, start time.Time)) (deliverOutcome, string, time.Time) {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evict(now, t)
	if e := s.calls[key]; e != nil {
		if received != nil {
			received(e.tool, e.start)
		}
		// The copies first: once woken, the first waiter's caller may
		// change what it got.
		for i := len(e.waiters) - 1; i >= 0; i-- {
			res := a.res
			if i > 0 {
				res = cloneResult(a.res)
			}
			select {
			case e.waiters[i].ch <- delivery{idx: e.waiters[i].idx, res: res}:
			default: // cannot happen: the channel has room for every call of the turn
			}
		}
		tool, start := e.tool, e.start
		s.settle(key, e, stateDone, a.data, now, t)
		s.evict(now, t)
		return outcomeDelivered, tool, start
	}
	k, ok := settledKeyOf(key)
	if !ok {
		return outcomeUnknown, "", time.Time{}
	}
	se, ok := s.settled[k]
	switch {
	case !ok:
		return outcomeUnknown, "", time.Time{}
	case se.state == stateGone:
		// Keep the late result: a retry of the same call gets it at once.
		s.settleAgain(k, se, stateDone, a.data, now, t)
		s.evict(now, t)
		return outcomeLate, s.tools[se.tool], t.at(se.start)
	default:
		return outcomeDuplicate, s.tools[se.tool], t.at(se.start)
	}
}

// leave removes w from id's waiters. When the last waiter leaves a pending
// call, the call becomes gone. A result delivered to w before leave is
// already in w's channel.
func (t *callTable) leave(id string, w waiter, now time.Time) {
	t.leaveFor(id, w, now, false)
}

// leaveFor is leave, reporting whether w was the call's last waiter. With
// cancel, the last waiter's leaving cancels the call: a later publish of
// it uses a new Nats-Msg-Id (callEntry.cancels).
func (t *callTable) leaveFor(id string, w waiter, now time.Time, cancel bool) (last bool) {
	s := t.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.calls[id]
	if e == nil {
		return false
	}
	for i, x := range e.waiters {
		if x == w {
			last := len(e.waiters) - 1
			e.waiters[i] = e.waiters[last]
			e.waiters[last] = waiter{}
			e.waiters = e.waiters[:last]
			break
		}
	}
	if len(e.waiters) == 0 {
		if cancel {
			e.cancels++
		}
		s.settle(id, e, stateGone, nil, now, t)
		s.evict(now, t)
		return true
	}
	return false
}

// cloneResult is a copy of res whose content is its own.
func cloneResult(res *envelope.Result) *envelope.Result {
	c := *res
	c.Content = slices.Clone(res.Content)
	return &c
}

// progressTarget is a waiter that asked for the progress of a call.
type progressTarget struct {
	f  ProgressFunc
	id string // the call's tool_use id
}

// progressOf appends to buf the waiters of key that asked for progress.
func (t *callTable) progressOf(key string, buf []progressTarget) []progressTarget {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.calls[key]
	if e == nil {
		return buf
	}
	for _, w := range e.waiters {
		if w.t != nil && w.t.progress != nil {
			buf = append(buf, progressTarget{f: w.t.progress, id: w.t.calls[w.idx].ID})
		}
	}
	return buf
}

// pending reports whether key has waiters.
func (t *callTable) pending(key string) bool {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[key] != nil
}

// shared reports whether more than one turn waits for key: the others
// published it, or will.
func (t *callTable) shared(key string) bool {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.calls[key]
	return e != nil && len(e.waiters) > 1
}

// stats returns the number of pending and settled ids, for tests.
func (t *callTable) stats() (pending, settled int) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		pending += len(s.calls)
		settled += len(s.settled)
		s.mu.Unlock()
	}
	return pending, settled
}

// newEntry is an entry for a new pending call: one a settled call left, or
// a new one. Lock held.
func (s *tableShard) newEntry() *callEntry {
	if n := len(s.free); n > 0 {
		e := s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
		return e
	}
	return &callEntry{}
}

// maxFree bounds the entries a shard keeps for reuse: about the calls it
// has pending at once.
const maxFree = 64

// settle moves the pending entry e of id to the settled calls in state st,
// caching data (done), and queues it for eviction; e is kept for reuse.
// Lock held.
func (s *tableShard) settle(id string, e *callEntry, st callState, data []byte, now time.Time, t *callTable) {
	delete(s.calls, id)
	se := settledEntry{state: st, tool: s.toolIndex(e.tool), cancels: e.cancels, start: t.since(e.start)}
	*e = callEntry{} // holds no turn
	if len(s.free) < maxFree {
		s.free = append(s.free, e)
	}
	k, ok := settledKeyOf(id)
	if !ok {
		return // no call key: nothing can ask for it again
	}
	s.settleAgain(k, se, st, data, now, t)
}

// settleAgain stores se as k's settled entry in state st, caching data
// (done), and queues it for eviction: a new settled call, or a gone one
// whose late result came. Lock held.
func (s *tableShard) settleAgain(k settledKey, se settledEntry, st callState, data []byte, now time.Time, t *callTable) {
	se.state, se.size, se.pos = st, 0, 0
	if data != nil {
		if pos, ok := s.ring.put(data, t.ringSize); ok {
			se.pos, se.size = pos, uint32(len(data))
		}
	}
	s.gen++
	se.gen = s.gen
	s.settled[k] = se
	s.fifo = append(s.fifo, fifoItem{key: k, gen: se.gen, at: t.since(now)})
}

// toolIndex is tool's index in s.tools, added if new (0, "", once the
// shard has maxToolNames). Lock held.
func (s *tableShard) toolIndex(tool string) uint32 {
	if i, ok := s.toolIdx[tool]; ok {
		return i
	}
	if len(s.tools) >= maxToolNames {
		return 0
	}
	i := uint32(len(s.tools))
	s.tools = append(s.tools, tool)
	s.toolIdx[tool] = i
	return i
}

// evict forgets settled entries that are too old, or the oldest ones while
// the shard is over its count. Lock held.
func (s *tableShard) evict(now time.Time, t *callTable) {
	nowT := t.since(now)
	for s.head < len(s.fifo) {
		it := s.fifo[s.head]
		se, ok := s.settled[it.key]
		live := ok && se.gen == it.gen
		if live && time.Duration(nowT-it.at) < t.ttl && len(s.settled) <= t.maxCount {
			break
		}
		if live {
			delete(s.settled, it.key)
		}
		s.head++
	}
	// Reclaim the consumed front of the FIFO once it dominates.
	if s.head > 64 && s.head*2 >= len(s.fifo) {
		n := copy(s.fifo, s.fifo[s.head:])
		s.fifo = s.fifo[:n]
		s.head = 0
	}
}

// resultRing holds the cached results of a shard's settled calls, in the
// order they came, in one buffer of a fixed size: a new result overwrites
// the oldest ones. A result's position is counted in bytes since the ring
// began (it never wraps), so whether it was overwritten is one comparison.
// The buffer grows with the results, to the ring's size at most: a
// dispatcher that settles few calls holds few bytes.
type resultRing struct {
	buf  []byte // the ring's first len(buf) bytes; the rest not written yet
	size uint64 // the ring's size; 0 until the first result
	end  uint64 // the position after the last result
}

// minRingBuf is the smallest buffer a ring grows to.
const minRingBuf = 4 << 10

// put copies data into the ring of size bytes and returns its position;
// false when data is empty or larger than the ring.
func (r *resultRing) put(data []byte, size int) (uint64, bool) {
	n, c := uint64(len(data)), uint64(size)
	if n == 0 || n > c {
		return 0, false
	}
	r.size = c
	pos := r.end
	if off := pos % c; off+n > c {
		pos += c - off // no room before the ring's end: the result starts at its front
	}
	off := pos % c
	if off+n > uint64(len(r.buf)) {
		grown := make([]byte, min(max(off+n, 2*uint64(len(r.buf)), minRingBuf), c))
		copy(grown, r.buf)
		r.buf = grown
	}
	copy(r.buf[off:], data)
	r.end = pos + n
	return pos, true
}

// get returns the n bytes of the result at pos, valid until the next put;
// false when newer results overwrote them.
func (r *resultRing) get(pos uint64, n uint32) ([]byte, bool) {
	c := r.size
	if c == 0 || r.end-pos > c {
		return nil, false
	}
	off := pos % c
	return r.buf[off : off+uint64(n)], true
}
