package dispatch

import (
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
// Settled ids (done, gone) are kept in a per-shard FIFO bounded by age,
// count and cached bytes. They let the table tell a late result (gone) from
// a duplicate (done) and from an unknown key, and let a repeated call be
// answered from the cache without executing the tool again.
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
// and encoded (data, which the cache keeps; a repeated call decodes its
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

type callEntry struct {
	tool    string
	state   callState
	start   time.Time // when it last became pending
	waiters []waiter  // statePending
	first   [1]waiter // waiters' room for one, the usual number
	result  []byte    // the encoded result, cached (stateDone)
	size    int64     // bytes accounted for result
	gen     uint64    // matches the FIFO item that may evict the entry
	// cancels counts the times the call was cancelled pool-wide: its
	// message in TOOL_CALLS is gone, so the call is published again under
	// a new Nats-Msg-Id (see callMsgID), which JetStream does not drop as a
	// duplicate of the cancelled one.
	cancels uint32
}

type fifoItem struct {
	id  string
	gen uint64
	at  time.Time
}

type tableShard struct {
	mu      sync.Mutex
	calls   map[string]*callEntry
	fifo    []fifoItem
	head    int
	settled int   // entries in stateDone or stateGone
	bytes   int64 // sum of size over settled entries
	gen     uint64
	_       [64]byte // keep neighbouring shards' locks off one cache line
}

type callTable struct {
	ttl      time.Duration
	maxCount int   // settled entries per shard
	maxBytes int64 // cached result bytes per shard
	shards   [tableShards]tableShard
}

func newCallTable(ttl time.Duration, maxSettled int, maxBytes int64) *callTable {
	t := &callTable{
		ttl:      ttl,
		maxCount: max(maxSettled/tableShards, 1),
		maxBytes: max(maxBytes/tableShards, 1),
	}
	for i := range t.shards {
		t.shards[i].calls = make(map[string]*callEntry)
	}
	return t
}

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

// registerEpoch is register that returns the cached result encoded, and
// how often the call was cancelled pool-wide: its publishes use
// callMsgID(id, epoch).
func (t *callTable) registerEpoch(id, tool string, w waiter, now time.Time) ([]byte, bool, uint32) {
	s := t.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evict(now, t)
	e := s.calls[id]
	switch {
	case e == nil:
		e = &callEntry{tool: tool, state: statePending, start: now}
		e.first[0] = w
		e.waiters = e.first[:1]
		s.calls[id] = e
		return nil, false, 0
	case e.state == statePending:
		e.waiters = append(e.waiters, w)
	case e.state == stateDone && e.result != nil:
		return e.result, true, 0
	default:
		// Gone: the call may still be running, and its result will come
		// here. Done with a result too large to cache: the caller waits,
		// and gets the deadline answer if the call is not run again.
		s.unsettle(e)
		e.state, e.start, e.tool = statePending, now, tool
		e.waiters = append(e.first[:0], w)
	}
	return nil, false, e.cancels
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
// every waiter owns what it gets. The cache keeps a.data; size is what
// caching it costs. When the call was pending, received (if not nil) is called
// with its tool and start before any waiter is woken, so what it counts is
// counted by the time Dispatch returns. deliver returns the outcome, the
// call's tool and when the call became pending.
func (t *callTable) deliver(key string, a arrival, size int64, now time.Time, received func(tool string, start time.Time)) (deliverOutcome, string, time.Time) {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evict(now, t)
	e := s.calls[key]
	if e == nil {
		return outcomeUnknown, "", time.Time{}
	}
	switch e.state {
	case statePending:
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
		clear(e.waiters)
		e.waiters = e.waiters[:0]
		s.settle(e, key, stateDone, a.data, size, now, t)
		s.evict(now, t)
		return outcomeDelivered, e.tool, e.start
	case stateGone:
		// Keep the late result: a retry of the same call gets it at once.
		s.unsettle(e)
		s.settle(e, key, stateDone, a.data, size, now, t)
		s.evict(now, t)
		return outcomeLate, e.tool, e.start
	default:
		return outcomeDuplicate, e.tool, e.start
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
	if e == nil || e.state != statePending {
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
		s.settle(e, id, stateGone, nil, 0, now, t)
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
	if e == nil || e.state != statePending {
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
	e := s.calls[key]
	return e != nil && e.state == statePending
}

// shared reports whether more than one turn waits for key: the others
// published it, or will.
func (t *callTable) shared(key string) bool {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.calls[key]
	return e != nil && e.state == statePending && len(e.waiters) > 1
}

// stats returns the number of pending and settled ids, for tests.
func (t *callTable) stats() (pending, settled int) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		pending += len(s.calls) - s.settled
		settled += s.settled
		s.mu.Unlock()
	}
	return pending, settled
}

// settle moves a pending (or just unsettled) entry to state st and queues it
// for eviction. Lock held.
func (s *tableShard) settle(e *callEntry, id string, st callState, data []byte, size int64, now time.Time, t *callTable) {
	e.state = st
	e.waiters, e.first = nil, [1]waiter{} // holds no turn while settled
	e.result, e.size = nil, 0
	if data != nil && size <= t.maxBytes {
		e.result, e.size = data, size
	}
	s.gen++
	e.gen = s.gen
	s.settled++
	s.bytes += e.size
	s.fifo = append(s.fifo, fifoItem{id: id, gen: e.gen, at: now})
}

// unsettle takes a settled entry out of the settled accounting; its FIFO item
// goes stale. Lock held.
func (s *tableShard) unsettle(e *callEntry) {
	if e.state == statePending {
		return
	}
	s.settled--
	s.bytes -= e.size
	e.result, e.size = nil, 0
	e.gen = 0
}

// evict forgets settled entries that are too old, or the oldest ones while
// the shard is over its count or byte budget. Lock held.
func (s *tableShard) evict(now time.Time, t *callTable) {
	for s.head < len(s.fifo) {
		it := s.fifo[s.head]
		e := s.calls[it.id]
		live := e != nil && e.state != statePending && e.gen == it.gen
		if live && now.Sub(it.at) < t.ttl && s.settled <= t.maxCount && s.bytes <= t.maxBytes {
			break
		}
		if live {
			s.settled--
			s.bytes -= e.size
			delete(s.calls, it.id)
		}
		s.fifo[s.head] = fifoItem{}
		s.head++
	}
	// Reclaim the consumed front of the FIFO once it dominates.
	if s.head > 64 && s.head*2 >= len(s.fifo) {
		n := copy(s.fifo, s.fifo[s.head:])
		clear(s.fifo[n:])
		s.fifo = s.fifo[:n]
		s.head = 0
	}
}
