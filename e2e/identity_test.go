package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/internal/promtest"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// countingEcho is an idempotent tool that returns its input's text and
// counts its executions by text.
type countingEcho struct {
	mu    sync.Mutex
	execs map[string]int
}

func (c *countingEcho) tool() tools.Tool {
	c.execs = map[string]int{}
	return tools.Tool{
		Name: "echo", Description: "returns the text", InputSchema: anySchema,
		Timeout: 5 * time.Second, Retry: fastRetry, Idempotent: true,
		Handler: func(_ context.Context, in json.RawMessage) (tools.Output, error) {
			var v struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(in, &v)
			c.mu.Lock()
			c.execs[v.Text]++
			c.mu.Unlock()
			return tools.Text(v.Text), nil
		},
	}
}

func (c *countingEcho) count(text string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.execs[text]
}

// Finding 2 of issue 12: a tool_use id reused in another session, tenant
// or with other content is another call with its own result; only the same
// id with the same content in the same scope is the same call.
func TestReusedCallIDIsAnotherCall(t *testing.T) {
	t.Parallel()
	var echo countingEcho
	p := newPool(t, echo.tool(), slowCounter(new(atomic.Int64)))
	p.startWorker()

	dispatchOne := func(ctx context.Context, session, tool, input string) envelope.Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, waitLong)
		defer cancel()
		res, err := p.d.Dispatch(ctx, session, []envelope.ToolUseBlock{{Type: "tool_use", ID: "call_0", Name: tool, Input: json.RawMessage(input)}})
		if err != nil {
			t.Fatalf("Dispatch: %v", err)
		}
		return res[0]
	}
	bg := context.Background()
	steps := []struct {
		what         string
		ctx          context.Context
		session      string
		tool, input  string
		want         string
		text         string // the execution count to check
		wantExecuted int
	}{
		{"first conversation", bg, "s1", "echo", `{"text":"first conversation"}`, "first conversation", "first conversation", 1},
		{"same id in another session", bg, "s2", "echo", `{"text":"second conversation"}`, "second conversation", "second conversation", 1},
		{"same id and content in another tenant", dispatch.WithTenant(bg, "acme"), "s1", "echo", `{"text":"first conversation"}`, "first conversation", "first conversation", 2},
		{"same id, other content, same session", bg, "s1", "echo", `{"text":"third"}`, "third", "third", 1},
		{"same id, another tool", bg, "s1", "charge_card", `{"amount":1}`, "charged", "", 0},
		{"the same call again", bg, "s1", "echo", `{"text": "first conversation"}`, "first conversation", "first conversation", 2},
		{"the same call again in the other tenant", dispatch.WithTenant(bg, "acme"), "s1", "echo", `{"text":"first conversation"}`, "first conversation", "first conversation", 2},
	}
	for _, s := range steps {
		r := dispatchOne(s.ctx, s.session, s.tool, s.input)
		if r.IsError || r.CallID != "call_0" || r.Content.Text() != s.want {
			t.Errorf("%s: result %q (is_error %v); want %q", s.what, r.Content.Text(), r.IsError, s.want)
		}
		if s.text != "" {
			if n := echo.count(s.text); n != s.wantExecuted {
				t.Errorf("%s: echo %q ran %d times; want %d", s.what, s.text, n, s.wantExecuted)
			}
		}
	}
}

// blockingTool runs until released, counting its executions.
type blockingTool struct {
	execs   atomic.Int64
	release chan struct{}
}

func newBlockingTool(name string, idempotent bool) (*blockingTool, tools.Tool) {
	b := &blockingTool{release: make(chan struct{})}
	return b, tools.Tool{
		Name: name, Description: "runs until released", InputSchema: anySchema,
		Timeout: 20 * time.Second, Retry: fastRetry, Idempotent: idempotent,
		Handler: func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
			n := b.execs.Add(1)
			select {
			case <-b.release:
			case <-ctx.Done():
				return tools.Output{}, ctx.Err()
			}
			if n > 1 {
				return tools.Text("done again"), nil
			}
			return tools.Text("done"), nil
		},
	}
}

// Finding 3 of issue 12: a call re-posted to another orchestrator instance
// (or to this one after a restart: a new instance id) gets the result of
// the call that ran under the first one, without a second execution: when
// the first dispatcher was gone before the result came, and while the call
// still runs.
func TestRepostToAnotherInstanceGetsTheResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		finished bool // the call's result is stored before the re-post
	}{{"result stored", true}, {"call still running", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bt, tool := newBlockingTool("deploy", true)
			p := newPool(t, tool)
			p.startWorker()
			b := toolUse("deploy", `{"env":"staging"}`)

			first := p.dispatchAsync(context.Background(), b)
			eventually(t, "the call to start", func() bool { return bt.execs.Load() == 1 })
			dead, kill := context.WithCancel(context.Background())
			kill()
			_ = p.d.Stop(dead) // the first orchestrator dies at once: its result consumer is gone
			if tr := <-first; !errors.Is(tr.err, dispatch.ErrStopped) {
				t.Fatalf("the stopped dispatcher's Dispatch = %v; want ErrStopped", tr.err)
			}
			if tc.finished {
				close(bt.release)
				eventually(t, "the result to be stored", func() bool {
					return streamState(t, p.js, jetstream.StreamResults).Msgs == 1
				})
			}

			secondOrch := pooltest.StartOrchestrator(t, p.js.Conn(), discovery.RegistryCatalog(p.reg))
			second := secondOrch.Dispatcher()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			turn := make(chan turnResult, 1)
			go func() {
				res, err := second.Dispatch(ctx, "", []envelope.ToolUseBlock{b})
				turn <- turnResult{res, err}
			}()
			if !tc.finished {
				// The re-post is stored (a duplicate of the first post) and
				// waits for the running call.
				eventually(t, "the re-post to be stored", func() bool {
					return promtest.Gather(t, secondOrch.Metrics()).Value("toolpool_dispatch_calls_total", "tool", "deploy") == 1
				})
				close(bt.release)
			}
			tr := <-turn
			if tr.err != nil {
				t.Fatalf("re-post: %v", tr.err)
			}
			if r := tr.results[0]; r.IsError || r.Content.Text() != "done" {
				t.Errorf("re-post: result %q (is_error %v, code %s); want the first execution's %q", r.Content.Text(), r.IsError, r.Code, "done")
			}
			if n := bt.execs.Load(); n != 1 {
				t.Errorf("executions = %d; want 1", n)
			}
		})
	}
}

// Finding 5 of issue 12 (a): a redelivered call whose result is already
// stored (its worker published the result and died before acking) is
// answered from it, not executed again.
func TestRedeliveredCallAnsweredFromStoredResult(t *testing.T) {
	t.Parallel()
	var echo countingEcho
	p := newPool(t, echo.tool())
	b := toolUse("echo", `{"text":"once"}`)
	turn := p.dispatchAsync(context.Background(), b)

	// A first worker takes the call, publishes its result and dies before
	// acking: here it hands the call back instead, which redelivers it the
	// same way, only sooner.
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cons, err := jetstream.EnsureConsumer(ctx, p.js, jetstream.ConsumerSpec{Tool: "echo", Timeout: 5 * time.Second, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, js.FetchMaxWait(waitLong))
	if err != nil {
		t.Fatal(err)
	}
	var msg js.Msg
	for m := range batch.Messages() {
		msg = m
	}
	if msg == nil {
		t.Fatalf("no call delivered: %v", batch.Error())
	}
	call, err := envelope.DecodeCall(msg.Data(), envelope.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.js.PublishMsg(ctx, resultMsg(t, call, "once")); err != nil {
		t.Fatal(err)
	}
	if err := msg.Nak(); err != nil {
		t.Fatal(err)
	}

	events := newRecordingMetrics()
	p.startWorker(func(c *worker.Config) { c.Metrics = events })
	res := await(t, turn)
	if r := res[0]; r.IsError || r.Content.Text() != "once" {
		t.Errorf("result %+v; want %q", r, "once")
	}
	eventually(t, "the redelivery to be settled", func() bool { return len(events.all()) == 1 })
	if ev := events.all()[0]; ev.Outcome != outcomeStored || ev.Attempt != 2 {
		t.Errorf("the redelivery ended %s at attempt %d; want %s at attempt 2", ev.Outcome, ev.Attempt, outcomeStored)
	}
	if n := echo.count("once"); n != 0 {
		t.Errorf("the tool ran %d times on the redelivery; want 0 (its result was stored)", n)
	}
	if n := streamState(t, p.js, jetstream.StreamCalls).Msgs; n != 0 {
		t.Errorf("TOOL_CALLS still holds %d calls; want the redelivery acked", n)
	}
}

// Finding 5 of issue 12, found again from outside: after a kill -9 of the
// NATS server, a redelivered call of a tool marked idempotent: false ran a
// second time (1 of 4,000) because the look-up of its stored result timed
// out while the server came back, and a failed look-up ran the call. For
// such a tool a look-up that fails hands the call back: it runs, or is
// answered from its result, once the look-up works.
func TestStoredResultLookupFailureDoesNotRerunNonIdempotentTool(t *testing.T) {
	t.Parallel()
	var echo countingEcho
	tool := echo.tool()
	tool.Idempotent = false
	p := newPool(t, tool)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	history, err := settle.OpenHistory(ctx, p.js, settle.HistoryConfig{Storage: js.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	turn := p.dispatchAsync(context.Background(), toolUse("echo", `{"text":"once"}`))

	// A first worker ran the call and stored its result; the call comes
	// again (as after a server restart that lost the ack).
	cons, err := jetstream.EnsureConsumer(ctx, p.js, jetstream.ConsumerSpec{Tool: "echo", Timeout: 5 * time.Second, MaxAttempts: 5})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, js.FetchMaxWait(waitLong))
	if err != nil {
		t.Fatal(err)
	}
	var msg js.Msg
	for m := range batch.Messages() {
		msg = m
	}
	if msg == nil {
		t.Fatalf("no call delivered: %v", batch.Error())
	}
	call, err := envelope.DecodeCall(msg.Data(), envelope.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.js.PublishMsg(ctx, resultMsg(t, call, "once")); err != nil {
		t.Fatal(err)
	}
	if err := msg.Nak(); err != nil {
		t.Fatal(err)
	}

	// A worker whose look-ups fail: every wait on the server times out at once.
	failing, _ := startWorkerOn(t, p.srv.ClientURL(), p.reg, func(c *worker.Config) {
		c.History = history
		c.PublishTimeout = time.Nanosecond
	})
	eventually(t, "the worker to take the redelivery", func() bool {
		return echo.count("once") > 0 || natstest.CallConsumerInfo(t, p.js, "echo").Delivered.Consumer >= 3
	})
	if n := echo.count("once"); n != 0 {
		t.Fatalf("the tool ran %d times while its stored result could not be looked up; want 0", n)
	}
	stop, cancelStop := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelStop()
	if err := failing.Stop(stop); err != nil {
		t.Logf("worker Stop: %v", err)
	}

	events := newRecordingMetrics()
	p.startWorker(func(c *worker.Config) { c.History = history; c.Metrics = events })
	if r := await(t, turn)[0]; r.IsError || r.Content.Text() != "once" {
		t.Errorf("result %+v; want %q", r, "once")
	}
	eventually(t, "the call to be answered from its stored result", func() bool {
		for _, ev := range events.all() {
			if ev.Outcome == outcomeStored {
				return true
			}
		}
		return false
	})
	if n := echo.count("once"); n != 0 {
		t.Errorf("the tool ran %d times; want 0 (its result was stored)", n)
	}
}

// Finding 5 of issue 12 (b): a call of a tool that is not idempotent whose
// worker died mid-call is not started again: the model is told its outcome
// is unknown. An idempotent tool in the same situation runs again.
func TestWorkerDiesMidCall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		idempotent bool
	}{{"not idempotent", false}, {"idempotent", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bt, tool := newBlockingTool("send_mail", tc.idempotent)
			tool.Timeout = 2 * time.Second
			p := newPool(t, tool)
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			history, err := settle.OpenHistory(ctx, p.js, settle.HistoryConfig{Storage: js.MemoryStorage})
			if err != nil {
				t.Fatal(err)
			}
			// The redelivery comes the ack wait after the death: 4 s for
			// both workers (each brings the consumer to its own), the
			// default being 20 s.
			const ackWait = 4 * time.Second
			withHistory := func(c *worker.Config) { c.History, c.AckWait = history, ackWait }
			_, nc1 := startWorkerOn(t, p.srv.ClientURL(), p.reg, withHistory)
			if got := natstest.CallConsumerInfo(t, p.js, "send_mail").Config.AckWait; got != ackWait {
				t.Errorf("tool_send_mail's AckWait is %v; want the workers' %v", got, ackWait)
			}

			turn := p.dispatchAsync(ctx, toolUse("send_mail", `{"to":"ops"}`))
			eventually(t, "the call to start", func() bool { return bt.execs.Load() == 1 })
			nc1.Close() // the worker is gone mid-call: no result, no ack, no heartbeat
			close(bt.release)
			p.startWorker(withHistory)

			r := await(t, turn)[0]
			if tc.idempotent {
				if r.IsError || r.Content.Text() != "done again" {
					t.Errorf("result %+v; want the second execution's %q", r, "done again")
				}
				if n := bt.execs.Load(); n != 2 {
					t.Errorf("executions = %d; want 2", n)
				}
				return
			}
			if !r.IsError || r.Code != codeOutcomeUnknown || r.Class != envelope.ClassPermanent {
				t.Fatalf("result %+v; want an is_error of class permanent, code %s", r, codeOutcomeUnknown)
			}
			assertModelSafe(t, r.Content.Text())
			for _, want := range []string{"unknown", "send_mail", "check"} {
				if !strings.Contains(r.Content.Text(), want) {
					t.Errorf("content %q does not say %q", r.Content.Text(), want)
				}
			}
			if n := bt.execs.Load(); n != 1 {
				t.Errorf("executions = %d; want 1", n)
			}
			// Operators see it in TOOL_DLQ.
			letters := streamMsgs(t, p.js, jetstream.StreamDLQ, "")
			if len(letters) != 1 || letters[0].Header.Get(settle.HeaderReason) != "outcome_unknown" {
				t.Errorf("TOOL_DLQ holds %d letters (first reason %q); want one, reason outcome_unknown",
					len(letters), func() string {
						if len(letters) == 0 {
							return ""
						}
						return letters[0].Header.Get(settle.HeaderReason)
					}())
			}
		})
	}
}

// A worker stopped while it runs a call of a tool that is not idempotent
// hands the call back; the next worker does not start it again.
func TestShutdownHandBackIsNotStartedAgain(t *testing.T) {
	t.Parallel()
	bt, tool := newBlockingTool("send_mail", false)
	p := newPool(t, tool)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	history, err := settle.OpenHistory(ctx, p.js, settle.HistoryConfig{Storage: js.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	withHistory := func(c *worker.Config) { c.History = history; c.DrainTimeout = 100 * time.Millisecond }
	w1 := p.startWorker(withHistory)
	turn := p.dispatchAsync(ctx, toolUse("send_mail", `{"to":"ops"}`))
	eventually(t, "the call to start", func() bool { return bt.execs.Load() == 1 })
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_ = w1.Stop(stopCtx) // drain timeout: the running call is cancelled and handed back
	stopCancel()
	p.startWorker(withHistory)
	r := await(t, turn)[0]
	if !r.IsError || r.Code != codeOutcomeUnknown {
		t.Errorf("result %+v; want code %s", r, codeOutcomeUnknown)
	}
	if n := bt.execs.Load(); n != 1 {
		t.Errorf("executions = %d; want 1", n)
	}
	close(bt.release)
}

// A call of a tool that is not idempotent sent again after the duplicate
// window (a new message in TOOL_CALLS) is answered from the result its first
// run stored, also when that was for another orchestrator instance; a stored
// transient error of such an earlier run is not reused: the call runs.
func TestRepostPastDuplicateWindow(t *testing.T) {
	t.Parallel()
	bt, tool := newBlockingTool("send_mail", false)
	close(bt.release)
	p := newPool(t, tool)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	history, err := settle.OpenHistory(ctx, p.js, settle.HistoryConfig{Storage: js.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	p.startWorker(func(c *worker.Config) { c.History = history })

	stored := func(b envelope.ToolUseBlock, res *envelope.Result) {
		t.Helper()
		call := &envelope.Call{ID: b.ID, Tool: b.Name, Input: b.Input, ReplyTo: "orch-before-restart"}
		call.Key = call.CallKey()
		m := resultMsg(t, call, res.Content.Text())
		if res.IsError {
			res.CallID, res.Key, res.Tool = call.ID, call.Key, call.Tool
			data, err := envelope.EncodeResult(res)
			if err != nil {
				t.Fatal(err)
			}
			m.Data = data
		}
		if _, err := p.js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	ran := toolUse("send_mail", `{"to":"ops"}`)
	stored(ran, &envelope.Result{Content: envelope.Text("sent before the restart")})
	if r := p.callBlock(ran); r.IsError || r.Content.Text() != "sent before the restart" {
		t.Errorf("re-post of a call that ran: result %q (is_error %v); want the stored one", r.Content.Text(), r.IsError)
	}
	if n := bt.execs.Load(); n != 0 {
		t.Errorf("executions = %d after the re-post of a call that ran; want 0", n)
	}

	failed := toolUse("send_mail", `{"to":"dev"}`)
	stored(failed, &envelope.Result{IsError: true, Class: envelope.ClassTransient, Code: "http_503",
		Content: envelope.Text("The mail service was unavailable.")})
	if r := p.callBlock(failed); r.IsError || r.Content.Text() != "done" {
		t.Errorf("re-post of a call that failed transiently: result %q (is_error %v); want a new run's %q", r.Content.Text(), r.IsError, "done")
	}
	if n := bt.execs.Load(); n != 1 {
		t.Errorf("executions = %d; want 1", n)
	}
}
