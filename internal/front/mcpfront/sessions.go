package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errSessionClosed is the cause a fast call is cancelled with when its
// session closes.
var errSessionClosed = errors.New("mcpfront: the MCP session closed")

// sessionTable holds the HTTP sessions the go-sdk opened, by id, for the
// fast path of tools/call (fastcall.go), and keeps their idle timers: a
// call the go-sdk does not see must keep its session alive too, so the
// go-sdk's own timer is off and this one is paused while any POST of the
// session runs, as the go-sdk's was.
type sessionTable struct {
	timeout time.Duration // Config.SessionTimeout
	max     int           // Config.MaxSessions: negative, none

	mu      sync.Mutex
	byID    map[string]*httpSession
	pending int // initializes in progress that reserved a place
}

// reserve takes a place for a session an initialize may open; false when
// the table is full (its sessions and the initializes in progress).
// release gives the place back once the initialize is answered (its
// session, if any, is in byID by then).
func (t *sessionTable) reserve() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.max < 0 || len(t.byID)+t.pending >= t.max {
		return false
	}
	t.pending++
	return true
}

func (t *sessionTable) release() {
	t.mu.Lock()
	t.pending--
	t.mu.Unlock()
}

// has reports whether this process holds the session id.
func (t *sessionTable) has(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id] != nil
}

// closeAll closes the sessions held (Stop).
func (t *sessionTable) closeAll() {
	t.mu.Lock()
	all := make([]*httpSession, 0, len(t.byID))
	for _, hs := range t.byID {
		all = append(all, hs)
	}
	t.mu.Unlock()
	for _, hs := range all {
		_ = hs.ss.Close()
	}
}

// len is the number of sessions held.
func (t *sessionTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// httpSession is one session of the table.
type httpSession struct {
	ss      *mcp.ServerSession
	userID  string        // the token's user at initialize: later requests need the same
	timeout time.Duration // the idle timeout

	mu     sync.Mutex
	closed bool
	refs   int         // POSTs in progress
	timer  *time.Timer // the idle timer; nil without a timeout
	calls  map[jsonrpc.ID]context.CancelCauseFunc
}

// note records ss, a session of a request the go-sdk serves, the first
// time it is seen (its initialize). Stdio's session has no id and is not
// recorded.
func (t *sessionTable) note(ss *mcp.ServerSession, extra *mcp.RequestExtra) {
	id := ss.ID()
	if id == "" {
		return
	}
	t.mu.Lock()
	if t.byID[id] != nil {
		t.mu.Unlock()
		return
	}
	hs := &httpSession{ss: ss, timeout: t.timeout, calls: map[jsonrpc.ID]context.CancelCauseFunc{}}
	if extra != nil && extra.TokenInfo != nil {
		hs.userID = extra.TokenInfo.UserID
	}
	if t.timeout > 0 {
		hs.timer = time.AfterFunc(t.timeout, func() { _ = ss.Close() })
	}
	t.byID[id] = hs
	t.mu.Unlock()
	go func() {
		_ = ss.Wait()
		t.drop(id, hs)
	}()
}

// drop removes a closed session and ends its calls.
func (t *sessionTable) drop(id string, hs *httpSession) {
	t.mu.Lock()
	if t.byID[id] == hs {
		delete(t.byID, id)
	}
	t.mu.Unlock()
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.closed = true
	if hs.timer != nil {
		hs.timer.Stop()
		hs.timer = nil
	}
	for _, cancel := range hs.calls {
		cancel(errSessionClosed)
	}
}

// owned is the session of r's Mcp-Session-Id, if the table has it and
// r comes from its owner; nil otherwise (the go-sdk answers such a
// request as before).
func (t *sessionTable) owned(r *http.Request) *httpSession {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		return nil
	}
	t.mu.Lock()
	hs := t.byID[id]
	t.mu.Unlock()
	if hs == nil {
		return nil
	}
	if hs.userID != "" {
		if info := auth.TokenInfoFromContext(r.Context()); info == nil || info.UserID != hs.userID {
			return nil
		}
	}
	return hs
}

// startPOST pauses the idle timer while a POST of the session runs.
func (hs *httpSession) startPOST() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.timer == nil {
		return
	}
	if hs.refs == 0 {
		hs.timer.Stop()
	}
	hs.refs++
}

// endPOST starts the idle timer again once no POST of the session runs.
func (hs *httpSession) endPOST() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.timer == nil {
		return
	}
	hs.refs--
	if hs.refs == 0 {
		hs.timer.Reset(hs.timeout)
	}
}

// addCall records a fast call in flight; false when id is in flight
// already. On a session that closed meanwhile, the call is cancelled at
// once.
func (hs *httpSession) addCall(id jsonrpc.ID, cancel context.CancelCauseFunc) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if _, dup := hs.calls[id]; dup {
		return false
	}
	if hs.closed {
		cancel(errSessionClosed)
		return true
	}
	hs.calls[id] = cancel
	return true
}

// removeCall forgets a fast call that ended.
func (hs *httpSession) removeCall(id jsonrpc.ID) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	delete(hs.calls, id)
}

// cancelled cancels the fast call a notifications/cancelled names, if
// it is one (params: {"requestId": ..., "reason": ...}), as the go-sdk
// cancels its own (the cause is context.Canceled). The notification goes
// on to the go-sdk all the same, which answers it.
func (hs *httpSession) cancelled(params json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil || !id.IsValid() {
		return
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if cancel := hs.calls[id]; cancel != nil {
		cancel(nil)
	}
}
