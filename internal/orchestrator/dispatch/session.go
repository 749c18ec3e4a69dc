package dispatch

import (
	"container/list"
	"sync"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
)

// The session tracker counts, per agent session and tool, the is_error
// results in a row. Only sessions with a failing tool are kept: a success
// that brings a session's last count to zero forgets the session. Memory is
// bounded by an LRU per shard (MaxSessions in all), by SessionTTL for idle
// sessions, and by maxToolsPerSession.
const (
	sessionShards      = 16
	maxToolsPerSession = 64
)

type sessionState struct {
	id    string
	seen  time.Time
	fails map[string]int // tool → consecutive is_error results
}

type sessionShard struct {
	mu  sync.Mutex
	lru list.List // of *sessionState, most recent at the front
	m   map[string]*list.Element
}

type sessionTracker struct {
	ttl    time.Duration
	max    int // per shard
	shards [sessionShards]sessionShard
}

func newSessionTracker(maxSessions int, ttl time.Duration) *sessionTracker {
	t := &sessionTracker{ttl: ttl, max: max(maxSessions/sessionShards, 1)}
	for i := range t.shards {
		t.shards[i].m = make(map[string]*list.Element)
	}
	return t
}

// outcome is one result of a turn as the tracker sees it. record fills run.
type outcome struct {
	tool    string
	isError bool
	run     int // consecutive is_error results of tool after this one
}

// record applies a turn's outcomes, in order, to session and fills each
// outcome's run. An empty session is not tracked: every run stays 0.
func (t *sessionTracker) record(session string, now time.Time, outs []outcome) {
	if session == "" {
		return
	}
	h := uint32(2166136261)
	for i := 0; i < len(session); i++ {
		h ^= uint32(session[i])
		h *= 16777619
	}
	s := &t.shards[h%sessionShards]
	s.mu.Lock()
	defer s.mu.Unlock()

	var st *sessionState
	if el, ok := s.m[session]; ok {
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
				delete(st.fails, o.tool)
			}
			continue
		}
		if st == nil {
			st = &sessionState{id: session, fails: make(map[string]int)}
			s.m[session] = s.lru.PushFront(st)
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
		if el, ok := s.m[session]; ok {
			s.lru.Remove(el)
			delete(s.m, session)
		}
	}
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

// sessionScope is the session tracker's name for session of tenant. A NUL
// cannot occur in a tenant (the envelope refuses control characters).
func sessionScope(tenant, session string) string {
	if tenant == "" {
		return session
	}
	return tenant + "\x00" + session
}

// advise updates the session's failure counts in the calls' order and adds
// the advice sentence to results of a tool that has failed too often.
func (t *turn) advise() {
	if t.session == "" || len(t.results) == 0 {
		return
	}
	outs := make([]outcome, len(t.results))
	for i := range t.results {
		outs[i] = outcome{tool: t.calls[i].Name, isError: t.results[i].IsError}
	}
	t.d.sessions.record(sessionScope(t.tenant, t.session), time.Now(), outs)
	for i := range outs {
		if o := outs[i]; o.isError && o.run >= t.d.cfg.FailureThreshold {
			t.results[i].Content = withSentence(t.results[i].Content, classify.RepeatedFailureMessage(o.tool, o.run))
		}
	}
}
