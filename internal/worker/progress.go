package worker

import (
	"encoding/json"
	"time"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Progress of a running call (tools.ReportProgress).
const (
	// progressEvery is the shortest interval between two progress reports
	// of one call sent to its caller: a report that comes sooner waits for
	// it, and a later one replaces it (the last one wins).
	progressEvery = 100 * time.Millisecond
	// progressAckEvery is the shortest interval between two in-progress
	// acks a call's reports send (besides the heartbeats every call gets).
	progressAckEvery = time.Second
)

// progressState is a call's progress reporting, made at its first report:
// a call that reports nothing costs nothing.
type progressState struct {
	subject string // tools.progress.<instance>.<key>; "" when the caller did not ask
	sent    time.Time
	acked   time.Time
	pending tools.Progress
	has     bool // pending waits to be sent
	timer   *time.Timer
	armed   bool
	done    bool // the handler returned: nothing more is sent
}

var _ tools.ProgressReporter = (*job)(nil)

// ReportProgress is the job's tools.ProgressReporter: it keeps the call's
// message alive (an in-progress ack, at most every progressAckEvery) and,
// when the caller asked for progress (jetstream.HeaderProgress), sends the
// report to the caller's orchestrator on jetstream.ProgressSubject, at most
// one every progressEvery (a report that comes sooner is sent then, unless
// a newer one replaced it).
func (j *job) ReportProgress(p tools.Progress) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.ran {
		return // a handler abandoned, still reporting
	}
	st := j.prog
	if st == nil {
		st = &progressState{}
		if call := j.call; call != nil && call.ReplyTo != "" && j.msg.Headers().Get(jetstream.HeaderProgress) == "1" {
			st.subject = jetstream.ProgressSubject(call.ReplyTo, call.Key)
		}
		j.prog = st
	}
	if st.done {
		return
	}
	now := time.Now()
	if now.Sub(st.acked) >= progressAckEvery {
		st.acked = now
		_ = j.msg.InProgress()
	}
	if st.subject == "" {
		return
	}
	st.pending, st.has = p, true
	if st.armed {
		return
	}
	if wait := progressEvery - now.Sub(st.sent); wait > 0 {
		st.armed = true
		if st.timer == nil {
			st.timer = time.AfterFunc(wait, j.flushProgress)
		} else {
			st.timer.Reset(wait)
		}
		return
	}
	j.sendProgress(st, now)
}

// flushProgress sends the report that waited for progressEvery.
func (j *job) flushProgress() {
	j.mu.Lock()
	defer j.mu.Unlock()
	st := j.prog
	st.armed = false
	if st.has && !st.done {
		j.sendProgress(st, time.Now())
	}
}

// endProgress sends the report still waiting, before the call's result,
// and stops reporting: the handler returned.
func (j *job) endProgress() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.ran = true
	st := j.prog
	if st == nil || st.done {
		return
	}
	if st.has {
		j.sendProgress(st, time.Now())
	}
	st.done = true
	if st.timer != nil {
		st.timer.Stop()
	}
}

// sendProgress publishes st's pending report (core NATS: a report lost is
// replaced by the next one). j.mu held.
func (j *job) sendProgress(st *progressState, now time.Time) {
	st.has, st.sent = false, now
	data, err := json.Marshal(st.pending.Bounded())
	if err != nil {
		return
	}
	if nc := j.w.js.Conn(); nc != nil {
		_ = nc.Publish(st.subject, data)
	}
}
