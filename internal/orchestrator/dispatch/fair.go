package dispatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Fair shares. With Config.NoFairness off (the default) every call the
// turn is about to publish first asks the dispatcher's scheduler
// (package sched) for its turn: tool = the call's tool, key = its fairness key
// (ToolInfo.Fairness: the tenant, the session, or a top-level field of the
// input), weight and priority from the ctx (WithWeight, WithPriority), the
// tool's slots and per-key limits as the catalog's Lookup in prepare said.
// A call granted at once is published as before; the others wait in the
// scheduler, and the turn publishes each when its grant comes on the
// turn's channel (a delivery without a result). A ticket is released when
// the call's result reaches the turn, or when the turn leaves it
// (deadline, cancellation, Stop, a failed publish). A call still waiting
// at its deadline is answered with the transient is_error of HeldMessage:
// the limit that held it and when to try again (Retry-After), or that the
// tool was busy with other callers' calls.

// chanRoom is the room of a turn's channel for calls calls: a result for
// each, and a grant for each when the scheduler may hold them (a call
// held may get both: the result of the same call dispatched by another
// turn, and its grant).
func chanRoom(d *Dispatcher, calls int) int {
	if d.sched != nil {
		return 2 * calls
	}
	return calls
}

// Granted is the scheduler's notification (sched.Notifier) of a held
// call's grant: it goes on the turn's channel, which has room for it.
func (t *turn) Granted(tk *sched.Ticket) {
	select {
	case t.ch <- delivery{idx: tk.Index()}:
	default: // cannot happen: chanRoom
	}
}

// schedule asks the scheduler for the turn of every call about to be
// published; the calls not granted at once are held.
func (t *turn) schedule() {
	s := t.d.sched
	if s == nil || t.waiting == 0 {
		return
	}
	t.scheduled = true
	weight, prio := WeightFrom(t.ctx), sched.Priority(PriorityFrom(t.ctx))
	for i := range t.calls {
		sl := &t.slots[i]
		if sl.state != slotWaiting {
			continue
		}
		ok := s.AcquireTicket(&sl.tk, sched.Request{
			Tool: t.calls[i].Name, Key: t.fairKey(i), Tenant: t.tenant,
			Weight: weight, Priority: prio,
			Slots: sl.info.Slots, Limits: limitsOf(sl.info.PerKey),
			Index: i, Notify: t,
		})
		sl.ticketed, sl.held = true, !ok
		if !ok {
			t.held++
			t.admHold(i, -1)
		}
	}
}

// limitsOf is a tool's per-key limits as the scheduler takes them.
func limitsOf(l tools.KeyLimits) sched.Limits {
	return sched.Limits{Concurrency: l.Concurrency, Rate: float64(l.Rate), Per: l.Per, Burst: l.Burst}
}

// fairKey is the fairness key of call i: its tenant, or its session, or
// the value of a top-level field of its input, as the tool says; the
// tenant when the session or the field is missing.
func (t *turn) fairKey(i int) string {
	switch f := t.slots[i].info.Fairness; {
	case f == "" || f == tools.FairnessTenant:
	case f == tools.FairnessSession:
		if t.session != "" {
			return t.session
		}
	case strings.HasPrefix(f, tools.FairnessInputPrefix):
		if v, ok := topLevelField(t.calls[i].Input, f[len(tools.FairnessInputPrefix):]); ok {
			return v
		}
	}
	return t.tenant
}

// keyOf is the fairness key of the turn's first call to tool that waits
// to be published: what admission control weighs the turn's calls to the
// tool by.
func (t *turn) keyOf(tool string) string {
	for i := range t.calls {
		if t.slots[i].state == slotWaiting && t.calls[i].Name == tool {
			return t.fairKey(i)
		}
	}
	return t.tenant
}

// topLevelField returns the value of field name of the JSON object input:
// a string's text, any other value's compact JSON. ok is false when the
// input has no such field (or is not an object).
func topLevelField(input []byte, name string) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(input))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", false
		}
		if k, _ := tok.(string); k != name {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s, true
		}
		var b bytes.Buffer
		if json.Compact(&b, v) != nil {
			return "", false
		}
		return b.String(), true
	}
	return "", false
}

// granted handles the grant of held call i: it is published with the
// other grants already in, the results in meanwhile are taken. A grant
// at or past the deadline is not published: the call is answered as held
// (endHeld), and a publish the deadline cut short expires the turn
// rather than fail it.
func (t *turn) granted(i int) error {
	if !time.Now().Before(t.deadline) {
		return nil // wait expires the turn next
	}
	t.markGranted(i)
	t.takeDelivered()
	t.lookUpStored(true) // recovery.go
	if err := t.publish(); err != nil {
		if !errors.Is(err, errPublishDeadline) {
			return err
		}
		t.expire()
	}
	return nil
}

// markGranted takes call i out of the held calls: publish publishes it.
// A grant for a call answered meanwhile is ignored (endTicket released
// it).
func (t *turn) markGranted(i int) {
	if sl := &t.slots[i]; sl.state == slotWaiting && sl.held {
		sl.held = false
		t.held--
		t.admHold(i, +1)
		if t.tr != nil {
			t.traceGranted(i)
		}
	}
}

// admHold tells admission control that call i is held by the scheduler
// (-1) or no longer (+1): see admission.hold.
func (t *turn) admHold(i int, delta int64) {
	tool := t.calls[i].Name
	if gen, ok := t.adm.gen(tool); ok {
		t.d.adm.hold(tool, gen, delta)
	}
}

// endTicket ends call i's ticket, if it has one: released when it was
// granted, cancelled while it waits (and released if it was granted
// meanwhile).
func (t *turn) endTicket(i int) {
	sl := &t.slots[i]
	if !sl.ticketed {
		return
	}
	tk := &sl.tk
	sl.ticketed = false
	if sl.held {
		sl.held = false
		t.held--
		t.admHold(i, +1)
		if _, granted := t.d.sched.Cancel(tk); !granted {
			return
		}
	}
	t.d.sched.Release(tk)
}

// endHeld ends call i's ticket if the call still waits for its grant, and
// returns why it waited; ok is false for a call not held.
func (t *turn) endHeld(i int) (h sched.Hold, ok bool) {
	sl := &t.slots[i]
	if !sl.held || !sl.ticketed {
		return sched.Hold{}, false
	}
	tk := &sl.tk
	sl.ticketed, sl.held = false, false
	t.held--
	t.admHold(i, +1)
	h, granted := t.d.sched.Cancel(tk)
	if granted {
		// Granted as the deadline passed, never published: it waited its
		// whole time for its share. The caller releases it (endTicket),
		// after the turn's other held calls have been told why they
		// waited: a release now could grant one of them.
		sl.ticketed = true
		h = sched.Hold{Reason: sched.HeldByFairShare, Waited: time.Since(t.now), RetryAfter: time.Second}
	}
	return h, true
}

// heldResult is the transient is_error of held call i at its deadline.
func (t *turn) heldResult(i int, h sched.Hold) envelope.Result {
	c := t.calls[i]
	held := classify.Held{
		Tool: c.Name, Key: t.keyWords(i),
		Concurrency: h.Limits.Concurrency, Rate: h.Limits.Rate, Per: h.Limits.Per,
		Waited: h.Waited, RetryAfter: h.RetryAfter,
	}
	switch h.Reason {
	case sched.HeldByConcurrency:
		held.Reason = classify.HeldConcurrency
	case sched.HeldByRate:
		held.Reason = classify.HeldRate
	default:
		held.Reason = classify.HeldBusy
	}
	r := errorResult(c.ID, c.Name, envelope.ClassTransient, held.Code(), classify.HeldMessage(held))
	r.RetryAfter = time.Duration(classify.RetryAfterSeconds(h.RetryAfter)) * time.Second
	t.d.log.Debug("call held until its deadline", slog.String("call_id", c.ID), slog.String("tool", c.Name),
		slog.String("code", r.Code), slog.String("session", t.session), slog.Duration("waited", h.Waited))
	return r
}

// keyWords names call i's fairness key for the model: whose limit it is.
func (t *turn) keyWords(i int) string {
	switch f := t.slots[i].info.Fairness; {
	case f == tools.FairnessSession && t.session != "":
		return "this session"
	case strings.HasPrefix(f, tools.FairnessInputPrefix):
		if _, ok := topLevelField(t.calls[i].Input, f[len(tools.FairnessInputPrefix):]); ok {
			return "calls with this " + f[len(tools.FairnessInputPrefix):]
		}
	}
	return "this caller"
}

// SchedSnapshot is the scheduler's state now (sched.Snapshot): per tool
// its window, calls in flight and waiting, per-key limits and the
// busiest keys. Empty (no tools) with Config.NoFairness.
func (d *Dispatcher) SchedSnapshot() sched.Snapshot {
	if d.sched == nil {
		return sched.Snapshot{Instance: d.cfg.Instance, At: time.Now(), Replicas: 1}
	}
	return d.sched.Snapshot(d.cfg.Instance)
}

// takeDelivered takes what the turn's channel already holds, without
// waiting: results are answered, grants marked.
func (t *turn) takeDelivered() {
	for {
		select {
		case dl := <-t.ch:
			if dl.res != nil {
				t.answer(dl)
			} else {
				t.markGranted(dl.idx)
			}
		default:
			return
		}
	}
}
