package dispatch

import (
	"container/list"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
)

// The session tracker counts, per agent session and tool, the is_error
// results in a row. Only sessions with a failing tool are kept: a success
// that brings a session's last count to zero forgets the session. Memory is
// bounded by an LRU per shard (MaxSessions in all), by SessionTTL for idle
// sessions, and by maxToolsPerSession. A session is known by its key, a
// digest of its scope (tenant and session): the same on every replica, so
// the replicas can tell each other of its failures (advice.go) without
// sending the tenant's or the session's bytes.
const (
	sessionShards      = 16
	maxToolsPerSession = 64
)

// scopeKey is a session scope's key: the first 16 bytes of its SHA-256.
// 128 bits make a collision, even a sought one, out of reach, so no tenant
// can share another's counts.
type scopeKey [16]byte

// scopeKeyOf returns the key of session of tenant: the digest of the
// tenant, a NUL and the session, or of the session alone without a tenant.
// A NUL cannot occur in a tenant (the envelope refuses control
// characters). Up to the buffer's size the bytes stay on the stack, so a
// turn allocates nothing for its key.
func scopeKeyOf(tenant, session string) scopeKey {
	var buf [512]byte
	b := buf[:0]
	if tenant != "" {
		b = append(append(b, tenant...), 0)
	}
	sum := sha256.Sum256(append(b, session...))
	return scopeKey(sum[:16])
}

type sessionState struct {
	id    scopeKey
	seen  time.Time
	fails map[string]int // tool → consecutive is_error results
}

type sessionShard struct {
	mu  sync.Mutex
	lru list.List // of *sessionState, most recent at the front
	m   map[scopeKey]*list.Element
}

type sessionTracker struct {
	ttl    time.Duration
	max    int // per shard
	shards [sessionShards]sessionShard
}

func newSessionTracker(maxSessions int, ttl time.Duration) *sessionTracker {
	t := &sessionTracker{ttl: ttl, max: max(maxSessions/sessionShards, 1)}
	for i := range t.shards {
		t.shards[i].m = make(map[scopeKey]*list.Element)
	}
	return t
}

// outcome is one result of a turn as the tracker sees it. record fills run
// and reset.
type outcome struct {
	tool    string
	isError bool
	run     int  // consecutive is_error results of tool after this one
	reset   bool // a success that ended a run of is_error results
}

// record applies a turn's outcomes, in order, to session (of no tenant)
// and fills each outcome's run. An empty session is not tracked: every run
// stays 0.
func (t *sessionTracker) record(session string, now time.Time, outs []outcome) {
	if session == "" {
		return
	}
	t.recordKey(scopeKeyOf("", session), now, outs)
}

// shard returns the shard of key.
func (t *sessionTracker) shard(key scopeKey) *sessionShard {
	h := uint32(key[0]) | uint32(key[1])<<8 | uint32(key[2])<<16 | uint32(key[3])<<24
	return &t.shards[h%sessionShards]
}

// recordKey is record for the session of key.
func (t *sessionTracker) recordKey(key scopeKey, now time.Time, outs []outcome) {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()

	var st *sessionState
	if el, ok := s.m[key]; ok {
		st = el.Value.(*sessionState)
		if now.Sub(st.seen) > t.ttl {
			clear(st.fails)
		}
		s.lru.MoveToFront(el)
	}
	for i := range outs {
		o := &outs[i]
		if !o.isError {
			o.run = 0
			if st != nil {
				_, o.reset = st.fails[o.tool]
				delete(st.fails, o.tool)
			}
			continue
		}
		if st == nil {
			st = &sessionState{id: key, fails: make(map[string]int)}
			s.m[key] = s.lru.PushFront(st)
			for s.lru.Len() > t.max {
				old := s.lru.Back()
				s.lru.Remove(old)
				delete(s.m, old.Value.(*sessionState).id)
			}
		}
		n, ok := st.fails[o.tool]
		if !ok && len(st.fails) >= maxToolsPerSession {
			o.run = 1 // not tracked: this session already fails with many tools
			continue
		}
		n++
		st.fails[o.tool] = n
		o.run = n
	}
	if st == nil {
		return
	}
	st.seen = now
	if len(st.fails) == 0 {
		if el, ok := s.m[key]; ok {
			s.lru.Remove(el)
			delete(s.m, key)
		}
	}
}

// streak returns the consecutive is_error results of tool in session of
// tenant, for tests.
func (t *sessionTracker) streak(tenant, session, tool string) int {
	key := scopeKeyOf(tenant, session)
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.m[key]; ok {
		return el.Value.(*sessionState).fails[tool]
	}
	return 0
}

// len returns the number of sessions tracked, for tests.
func (t *sessionTracker) len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// advise updates the session's failure counts in the calls' order and adds
// the advice sentence to results of a tool that has failed too often.
func (t *turn) advise() {
	if t.session == "" || len(t.results) == 0 {
		return
	}
	var small [4]outcome // a turn of up to 4 calls, the usual, allocates none
	outs := small[:0]
	if len(t.results) > len(small) {
		outs = make([]outcome, 0, len(t.results))
	}
	for i := range t.results {
		outs = append(outs, outcome{tool: t.calls[i].Name, isError: t.results[i].IsError})
	}
	key := scopeKeyOf(t.tenant, t.session)
	t.d.sessions.recordKey(key, time.Now(), outs)
	t.d.advice.tell(key, outs) // the other replicas, if a count changed
	for i := range outs {
		if o := outs[i]; o.isError && o.run >= t.d.cfg.FailureThreshold {
			t.results[i].Content = withSentence(t.results[i].Content, classify.RepeatedFailureMessage(o.tool, o.run))
		}
	}
}
