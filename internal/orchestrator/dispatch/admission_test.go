package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Past MaxCallsInFlight a turn is refused at once, whole, with nothing
// published; once the calls in flight are answered, turns are admitted
// again (issue 12, finding 9).
func TestAdmissionBoundsCallsInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.MaxCallsInFlight = 4; c.SaturatedRetryAfter = 3 * time.Second })
	release := make(chan struct{})
	slow := startWorker(t, b, "slow", func(w *fakeWorker, c *envelope.Call, _ nats.Header, reply reply) {
		w.Go(func(done <-chan struct{}) {
			select {
			case <-release:
			case <-done:
				return
			}
			reply(&envelope.Result{Content: envelope.Text("slow done")}, c.ID)
		})
	})
	first := make(chan error, 1)
	go func() {
		_, err := b.d.Dispatch(timeout(t, 30*time.Second), "", []envelope.ToolUseBlock{
			use("adm_1", "slow", `{}`), use("adm_2", "slow", `{}`), use("adm_3", "slow", `{}`)})
		first <- err
	}()
	eventually(t, "the first turn's calls at the worker", func() bool { return slow.execs.Load() == 3 })

	_, err := b.d.Dispatch(timeout(t, 30*time.Second), "", []envelope.ToolUseBlock{use("adm_4", "echo", `{}`), use("adm_5", "slow", `{}`)})
	var se *SaturatedError
	if !errors.As(err, &se) || !errors.Is(err, ErrSaturated) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("second turn: err %v; want a *SaturatedError matching ErrSaturated and ErrUnavailable", err)
	}
	if se.Tool != "" || se.Load != 3 || se.Limit != 4 || se.RetryAfter != 3*time.Second {
		t.Errorf("SaturatedError %+v", se)
	}
	r := SaturatedResult("adm_5", "slow", se)
	if !r.IsError || r.Class != envelope.ClassTransient || !strings.Contains(r.Content.Text(), "saturated") ||
		!strings.Contains(r.Content.Text(), "again in 3s,") {
		t.Errorf("result for the model %+v", r)
	}

	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first turn: %v", err)
	}
	echo := startWorker(t, b, "echo", echoText)
	res, err := b.d.Dispatch(timeout(t, 30*time.Second), "", []envelope.ToolUseBlock{use("adm_6", "echo", `{"text":"again"}`), use("adm_7", "slow", `{}`)})
	if err != nil || res[0].Content.Text() != "again" || res[1].Content.Text() != "slow done" {
		t.Fatalf("after the load drained: %v %+v", err, res)
	}
	calls, _ := slow.seen()
	var ids []string
	for _, c := range calls {
		ids = append(ids, c.ID)
	}
	echoCalls, _ := echo.seen()
	for _, c := range echoCalls {
		ids = append(ids, c.ID)
	}
	for _, id := range ids {
		if id == "adm_4" || id == "adm_5" {
			t.Errorf("the refused turn's call %s ran", id)
		}
	}
}

// A tool whose consumer holds MaxQueueDepth calls, whoever published them,
// is refused at once; turns to other tools still run, and the tool is
// admitted again once its queue drains (issue 12, finding 9).
func TestAdmissionBoundsQueueDepth(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.MaxQueueDepth = 5; c.QueueDepthRefresh = 50 * time.Millisecond })
	ctx := timeout(t, 30*time.Second)
	cons, err := b.js.CreateOrUpdateConsumer(ctx, jetstream.StreamCalls, js.ConsumerConfig{
		Durable: jetstream.ConsumerName("slow"), FilterSubject: jetstream.CallSubject("slow"), AckPolicy: js.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Another orchestrator's backlog: five calls no worker takes yet.
	for i := range 5 {
		data, err := envelope.EncodeCall(&envelope.Call{ID: fmt.Sprintf("other_%d", i), Tool: "slow", Input: []byte(`{}`),
			ReplyTo: "orch-other", CreatedAt: time.Now(), Deadline: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.js.Publish(ctx, jetstream.CallSubject("slow"), data); err != nil {
			t.Fatal(err)
		}
	}
	startWorker(t, b, "echo", echoText)
	var se *SaturatedError
	natstest.Eventually(t, 10*time.Second, "a turn to slow refused", func() bool {
		c, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := b.d.Dispatch(c, "", []envelope.ToolUseBlock{use(fmt.Sprintf("probe_%d", time.Now().UnixNano()), "slow", `{}`)})
		return errors.As(err, &se)
	})
	if se.Tool != "slow" || se.Limit != 5 || se.Load < 5 {
		t.Errorf("SaturatedError %+v", se)
	}
	res, err := b.d.Dispatch(timeout(t, 10*time.Second), "", []envelope.ToolUseBlock{use("qd_echo", "echo", `{"text":"other tool"}`)})
	if err != nil || res[0].Content.Text() != "other tool" {
		t.Fatalf("a turn to another tool: %v %+v", err, res)
	}

	// The backlog drains: the tool is admitted again.
	cc, err := cons.Consume(func(m js.Msg) { _ = m.Ack() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Stop(); <-cc.Closed() })
	natstest.Eventually(t, 10*time.Second, "slow admitted again", func() bool {
		c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := b.d.Dispatch(c, "", []envelope.ToolUseBlock{use(fmt.Sprintf("again_%d", time.Now().UnixNano()), "slow", `{}`)})
		return !errors.Is(err, ErrSaturated)
	})
}

// Calls that were answered leave a tool's queue estimate: at a high call
// rate more calls than MaxQueueDepth are published between two reads of the
// queue's depth, and none of them waits in the queue. (The bench found the
// estimate counting every call published since the last read: at 10,000
// calls/s, 64 % of the turns were refused with an empty queue.)
func TestAdmissionForgetsAnsweredCalls(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.MaxQueueDepth = 10; c.QueueDepthRefresh = time.Hour })
	startWorker(t, b, "echo", echoText)
	for i := range 50 {
		id := fmt.Sprintf("seq_%d", i)
		res, err := b.d.Dispatch(timeout(t, 30*time.Second), "", []envelope.ToolUseBlock{use(id, "echo", `{"text":"ok"}`)})
		if err != nil {
			t.Fatalf("turn %d of 50, one call each, queue bound 10: %v", i+1, err)
		}
		if res[0].IsError {
			t.Fatalf("turn %d: %+v", i+1, res[0])
		}
	}
}

// The drain rate is measured only over intervals in which the queue was
// non-empty at both reads, and a turn is refused by estimate only when the
// rate is known and the last read saw calls waiting (issue 12, finding 9).
func TestQueueWaitEstimate(t *testing.T) {
	t.Parallel()
	const gap = 5 * time.Second
	t0 := time.Unix(1_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	var q queueDepth
	check := func(step string, now time.Time, want time.Duration, wantOK bool) {
		t.Helper()
		got, ok := q.wait(now, gap, 0)
		if ok != wantOK || (ok && (got < want-time.Millisecond || got > want+time.Millisecond)) {
			t.Errorf("%s: wait %v, %v; want %v, %v (rate %v)", step, got, ok, want, wantOK, q.rate())
		}
	}
	check("never read", t0, 0, false)
	q.sample(0, 0, 0, at(0), gap)
	q.sample(50, 0, 10, at(1), gap) // empty at the first read: arrivals, not capacity
	check("after a non-saturated interval", at(1), 0, false)
	q.sample(40, 0, 20, at(2), gap) // 10 deliveries in 1 s, queue non-empty at both reads
	check("rate known", at(2), 4*time.Second, true)
	q.since = 10
	check("calls published since the read", at(2), 5*time.Second, true)
	q.since = 0
	if got, _ := q.wait(at(2), gap, 5); got != 4500*time.Millisecond {
		t.Errorf("the turn's own 5 calls: wait %v, want 4.5s", got)
	}
	q.sample(40, 20, 25, at(2.5), gap) // 10/s again, 20 calls in the workers' hands: 2 s each
	if got, _ := q.wait(at(2.5), gap, 0); got != 6*time.Second {
		t.Errorf("with calls in progress: wait %v, want 6s", got)
	}
	q.sample(0, 0, 60, at(3), gap) // emptied: not measured, and never refuse on an empty queue
	check("empty queue", at(3), 0, false)
	q.sample(30, 0, 80, at(4), gap) // empty at the first read: not measured
	check("after a non-saturated interval, the old rate", at(4), 3*time.Second, true)
	q.sample(30, 0, 100, at(5), gap) // 20 in 1 s, after 13 in 1.3 s
	want := (13*drainDecay + 20) / (1.3*drainDecay + 1)
	if r := q.rate(); math.Abs(r-want) > 1e-9 || r <= 10 || r >= 20 {
		t.Errorf("smoothed rate %v, want %v", r, want)
	}
	q.sample(30, 0, 1000, at(5).Add(gap+time.Second), gap) // too long an interval: not measured
	q.sample(30, 0, 5, at(5).Add(gap+2*time.Second), gap)  // the counter went back (consumer made again)
	if r := q.rate(); math.Abs(r-want) > 1e-9 {
		t.Errorf("rate %v after unmeasured intervals, want %v", r, want)
	}
	check("a read too old", at(5).Add(3*gap), 0, false)

	var bursty queueDepth // 2 s calls, 20 at a time, read every second: 10/s
	bursty.sample(0, 0, 0, at(0), gap)
	bursty.sample(100, 0, 20, at(1), gap)
	bursty.sample(100, 0, 20, at(2), gap) // nothing delivered: still unknown
	if _, ok := bursty.wait(at(2), gap, 0); ok {
		t.Errorf("an estimate from no deliveries")
	}
	for i, d := range []uint64{40, 40, 60, 60, 80, 80, 100} {
		bursty.sample(100, 0, d, at(float64(3+i)), gap)
		if r := bursty.rate(); r < 6 || r > 14 {
			t.Errorf("bursty deliveries, read %d: rate %v, want about 10", i, r)
		}
	}

	var stalled queueDepth // no worker: the rate stays unknown
	stalled.sample(10, 0, 0, at(0), gap)
	stalled.sample(20, 0, 0, at(1), gap)
	if _, ok := stalled.wait(at(1), gap, 0); ok {
		t.Errorf("a rate of 0 gave an estimate")
	}
}

// A turn whose calls cannot start before its deadline, by the tool's queue
// over the rate its workers drain it, is refused at once with nothing
// published; a turn with time enough is admitted and answered, and once
// the queue drains short turns are admitted again (issue 12, finding 9).
func TestAdmissionByQueueWait(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.QueueDepthRefresh = 100 * time.Millisecond })
	ctx := timeout(t, 2*time.Minute)
	// A slow tool: 200 ms a call, two at a time (MaxAckPending), about 10
	// calls/s; the rest wait in its consumer. Once the refusal has been
	// checked it speeds up (callTime), so that the backlog does not take
	// its 15 s to drain.
	var callTime atomic.Int64
	callTime.Store(int64(200 * time.Millisecond))
	cons, err := b.js.CreateOrUpdateConsumer(ctx, jetstream.StreamCalls, js.ConsumerConfig{
		Durable: jetstream.ConsumerName("slow"), FilterSubject: jetstream.CallSubject("slow"),
		AckPolicy: js.AckExplicitPolicy, AckWait: time.Minute, MaxAckPending: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	w := &fakeWorker{t: t, js: b.js, done: make(chan struct{})}
	cc, err := cons.Consume(func(m js.Msg) {
		c, err := envelope.DecodeCall(m.Data(), envelope.DefaultLimits)
		if err != nil {
			_ = m.Term()
			return
		}
		w.mu.Lock()
		w.calls = append(w.calls, c)
		w.mu.Unlock()
		w.Go(func(done <-chan struct{}) {
			select {
			case <-time.After(time.Duration(callTime.Load())):
			case <-done:
				return
			}
			w.publish(c, &envelope.Result{Content: envelope.Text("slow done")}, msgID(c))
			_ = m.Ack()
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Stop(); <-cc.Closed(); close(w.done); w.wg.Wait() })

	// A backlog of 150 calls, about 15 s of work, admitted while the rate
	// is unknown.
	var backlog []envelope.ToolUseBlock
	for i := range 150 {
		backlog = append(backlog, use(fmt.Sprintf("backlog_%d", i), "slow", `{}`))
	}
	backlogDone := make(chan error, 1)
	go func() {
		res, err := b.d.Dispatch(timeout(t, 90*time.Second), "", backlog)
		for i := range res {
			if err == nil && res[i].Content.Text() != "slow done" {
				err = fmt.Errorf("backlog call %d: %+v", i, res[i])
			}
		}
		backlogDone <- err
	}()
	a := b.d.adm
	natstest.Eventually(t, 30*time.Second, "the drain rate of slow measured", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		q := a.observe("slow", time.Now())
		_, ok := q.wait(time.Now(), staleSamples*a.refresh, 1)
		return ok
	})

	_, err = b.d.Dispatch(timeout(t, 2*time.Second), "", []envelope.ToolUseBlock{use("wait_short", "slow", `{}`)})
	var se *SaturatedError
	if !errors.As(err, &se) || !errors.Is(err, ErrSaturated) {
		t.Fatalf("a turn with 2 s left behind about 10 s of queued work: err %v; want a *SaturatedError", err)
	}
	if se.Tool != "slow" || se.Wait <= se.Left || se.Left > 2*time.Second || se.Load <= 0 ||
		se.RetryAfter < SaturatedRetryAfterDefault || se.RetryAfter > SaturatedRetryAfterMax {
		t.Errorf("SaturatedError %+v", se)
	}
	if !strings.Contains(err.Error(), "of work") {
		t.Errorf("error %q does not give the estimate", err)
	}
	r := SaturatedResult("wait_short", "slow", se)
	if txt := r.Content.Text(); !r.IsError || r.Class != envelope.ClassTransient || !strings.Contains(txt, "slow is busy") ||
		!strings.Contains(txt, "s of queued work, more than this call's timeout (") || !strings.Contains(txt, "another approach") {
		t.Errorf("result for the model %+v", r)
	}

	callTime.Store(int64(time.Millisecond))

	// Time enough: admitted, and answered after the backlog (FIFO), so the
	// refused call would have been delivered before it had it been sent.
	res, err := b.d.Dispatch(timeout(t, 60*time.Second), "", []envelope.ToolUseBlock{use("wait_long", "slow", `{}`)})
	if err != nil || res[0].IsError || res[0].Content.Text() != "slow done" {
		t.Fatalf("a turn with 60 s left: %v %+v", err, res)
	}
	if err := <-backlogDone; err != nil {
		t.Fatalf("backlog: %v", err)
	}
	calls, _ := w.seen()
	for _, c := range calls {
		if c.ID == "wait_short" {
			t.Errorf("the refused call ran")
		}
	}

	// The queue drained: a short turn is admitted again.
	natstest.Eventually(t, 30*time.Second, "a short turn admitted again", func() bool {
		res, err := b.d.Dispatch(timeout(t, 2*time.Second), "", []envelope.ToolUseBlock{use(fmt.Sprintf("again_%d", time.Now().UnixNano()), "slow", `{}`)})
		return err == nil && res[0].Content.Text() == "slow done"
	})
}
