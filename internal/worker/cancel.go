package worker

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/infra/callctx"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/tools"
)

// ErrCancelled is the cause (context.Cause) given to the context of a call
// whose caller cancelled it (an HTTP client that disconnected, an MCP
// notifications/cancelled, a cancelled context in pkg/client): the handler
// sees it, and the call is neither retried nor dead-lettered.
var ErrCancelled = errors.New("worker: the caller cancelled the call")

// How long, and how many, cancellations of call messages this worker does
// not hold it remembers: the cancellation may come before the message (the
// orchestrator deletes a queued call from TOOL_CALLS too, so only a message
// already on its way to a worker can follow its cancellation).
const (
	cancelMemory    = time.Minute
	cancelMemoryMax = 4096
)

// A call is cancelled by a core NATS message on
// tools.cancel.<tool>.<key> whose body is the call message's stream
// sequence (jetstream.CancelSubject). Every worker subscribes to
// tools.cancel.> before it pulls, so a worker holding the message hears of
// it within a round trip: a running call's context is cancelled with
// ErrCancelled, a call queued for a slot or not yet started is settled
// without running (classify.CaseCancelled). A cancellation naming a message
// the worker does not hold is remembered a while, for a message still on
// its way; one for a call that finished is a no-op.

// subscribeCancels subscribes to every cancellation. w.mu held (Start).
func (w *Worker) subscribeCancels() {
	nc := w.js.Conn()
	if nc == nil {
		return
	}
	sub, err := nc.Subscribe(jetstream.CancelFilter, w.handleCancel)
	if err != nil {
		w.cfg.Logger.Warn("subscribing to cancellations failed; cancelled calls run to their end", "err", err)
		return
	}
	w.cancelSub = sub
}

// unsubscribeCancels ends the subscription of subscribeCancels.
func (w *Worker) unsubscribeCancels() {
	w.mu.Lock()
	sub := w.cancelSub
	w.cancelSub = nil
	w.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
}

// handleCancel is the handler of cancellations.
func (w *Worker) handleCancel(m *nats.Msg) {
	seq, err := strconv.ParseUint(string(m.Data), 10, 64)
	if err != nil || seq == 0 {
		return
	}
	tool, key, ok := strings.Cut(strings.TrimPrefix(m.Subject, jetstream.CancelSubjectPrefix), ".")
	if !ok || tool == "" || key == "" {
		return
	}
	now := time.Now()
	w.mu.Lock()
	j := w.seqs[seq]
	if j == nil {
		w.rememberCancel(seq, cancelNote{at: now, tool: tool, key: key})
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	if !j.isCall(tool, key) {
		return // another message at that sequence: TOOL_CALLS was made again
	}
	j.cancel()
}

// cancelNote is a remembered cancellation: when it came, and the call it
// names.
type cancelNote struct {
	at        time.Time
	tool, key string
}

// isCall reports whether the job's message is of tool and has the call
// key key: its Nats-Msg-Id is the key, or <key>.<n> for a call dispatched
// again after a cancellation (dispatch's callMsgID). A cancellation names
// both, so one whose sequence meets another message (the stream was made
// again) cancels nothing.
func (j *job) isCall(tool, key string) bool {
	if j.served.tool.Name != tool {
		return false
	}
	id := j.msg.Headers().Get(nats.MsgIdHdr)
	return id == key || (strings.HasPrefix(id, key) && len(id) > len(key) && id[len(key)] == '.')
}

// rememberCancel keeps the cancellation of seq for cancelMemory. w.mu held.
func (w *Worker) rememberCancel(seq uint64, note cancelNote) {
	if w.cancels == nil {
		w.cancels = make(map[uint64]cancelNote)
	}
	if len(w.cancels) >= cancelMemoryMax {
		for s, n := range w.cancels {
			if note.at.Sub(n.at) > cancelMemory {
				delete(w.cancels, s)
			}
		}
		for s := range w.cancels {
			if len(w.cancels) < cancelMemoryMax {
				break
			}
			delete(w.cancels, s)
		}
	}
	w.cancels[seq] = note
}

// takeCancel reports whether j's message was cancelled before it came (a
// cancellation of its sequence that names its call), and forgets it. w.mu
// held. It costs a length check when nothing was.
func (w *Worker) takeCancel(seq uint64, j *job) bool {
	if len(w.cancels) == 0 {
		return false
	}
	n, ok := w.cancels[seq]
	if ok {
		delete(w.cancels, seq)
	}
	return ok && time.Since(n.at) <= cancelMemory && j.isCall(n.tool, n.key)
}

// cancel marks the job cancelled by its caller, cancels its context when
// it runs, and wakes it when it queues for a slot.
func (j *job) cancel() {
	j.mu.Lock()
	j.cancelled.Store(true)
	stop := j.stop
	if j.wake != nil {
		close(j.wake)
		j.wake = nil
	}
	j.mu.Unlock()
	if stop != nil {
		stop(ErrCancelled)
	}
}

// wakeOnCancel returns a channel closed when the job is cancelled (at
// once when it is already): made only for a job that queues for a slot.
func (j *job) wakeOnCancel() <-chan struct{} {
	ch := make(chan struct{})
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cancelled.Load() {
		close(ch)
	} else {
		j.wake = ch
	}
	return ch
}

// runContext makes the context a handler runs with: cancelled with a
// *classify.TimeoutError after timeout, with ErrCancelled when the caller
// cancels the call, with ErrShutdown when the worker stops. Its Deadline is
// the timeout's, and it answers callctx.Key with the job (what
// tools.CallInfoFrom and tools.ReportProgress read), so it carries no context
// value of its own. endRun must be called when the handler is done.
//
// One timer serves the run (tick): it fires every heartbeat while the
// handler runs, to keep the call's message alive (InProgress), and at the
// timeout, to cancel the context with its cause. A call shorter than its
// heartbeat interval costs one timer armed and stopped, and no heartbeat.
// The context value lives in the job; the timeout's error is made only
// when it fires.
func (j *job) runContext(parent context.Context, timeout, heartbeat time.Duration) context.Context {
	cctx, stop := context.WithCancelCause(parent)
	j.rctx = runCtx{Context: cctx, deadline: time.Now().Add(timeout), job: j}
	j.mu.Lock()
	j.stop = stop
	j.timeout, j.beat = timeout, heartbeat
	j.timer = time.AfterFunc(min(heartbeat, timeout), j.tick)
	cancelled := j.cancelled.Load()
	j.mu.Unlock()
	if cancelled {
		stop(ErrCancelled)
	}
	return &j.rctx
}

// tick is the run's timer (runContext): at the timeout it cancels the
// handler's context, at every other tick it sends a heartbeat; then it
// arms itself for the next one, the timeout included, until endRun.
func (j *job) tick() {
	j.mu.Lock()
	if j.runEnded {
		j.mu.Unlock()
		return
	}
	rem := time.Until(j.rctx.deadline)
	timeout := rem <= 0 && !j.timedOut
	next := j.beat
	if rem > 0 {
		next = min(next, rem)
	}
	j.timedOut = j.timedOut || timeout
	j.timer.Reset(next)
	stop := j.stop
	j.mu.Unlock()
	if timeout {
		stop(&classify.TimeoutError{After: j.timeout})
		return
	}
	_ = j.msg.InProgress()
}

// endRun releases what runContext made.
func (j *job) endRun() {
	j.mu.Lock()
	j.runEnded = true
	j.timer.Stop()
	stop := j.stop
	j.mu.Unlock()
	stop(context.Canceled)
}

// runCtx is a handler's context: a cancel-cause context with the deadline
// of the call's timeout, carrying the job under callctx.Key.
type runCtx struct {
	context.Context
	deadline time.Time
	job      *job
}

// Deadline is when the call's timeout ends.
func (c *runCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Value answers callctx.Key with the call's job; other keys are the
// parent's.
func (c *runCtx) Value(key any) any {
	if key == (callctx.Key{}) {
		return c.job
	}
	return c.Context.Value(key)
}

// The job is the call its handler's context carries (callctx.Key).
var _ interface {
	CallInfo() tools.CallInfo
	tools.ProgressReporter
} = (*job)(nil)

// CallInfo describes the job's call to its handler (tools.CallInfoFrom).
func (j *job) CallInfo() tools.CallInfo {
	call := j.call
	tp := call.Traceparent
	if j.tr != nil { // tracing on: the execute_tool span's
		tp = j.tr.traceparent
	}
	return tools.CallInfo{
		ID: call.ID, Key: call.Key, Tenant: call.Tenant, Tool: j.served.tool.Name, Session: call.Session,
		Attempt: j.attempt, Deadline: call.Deadline, WorkerID: j.w.cfg.WorkerID, Traceparent: tp,
	}
}
