package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
		!strings.Contains(r.Content.Text(), "again in 3 seconds") {
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
