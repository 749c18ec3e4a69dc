package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

func TestDispatchResultsInCallOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.Instance = "orch-order" })
	// Answer in random order: each call replies after a random short delay.
	delayed := func(h handler) handler {
		return func(w *fakeWorker, c *envelope.Call, hdr nats.Header, r reply) {
			d := time.Duration(rand.IntN(40)) * time.Millisecond
			w.Go(func(done <-chan struct{}) {
				select {
				case <-time.After(d):
					h(w, c, hdr, r)
				case <-done:
				}
			})
		}
	}
	echo := startWorker(t, b, "echo", delayed(echoText))
	startWorker(t, b, "fail", delayed(alwaysFail))

	calls := []envelope.ToolUseBlock{
		use("toolu_1", "echo", `{"text":"one"}`),
		use("toolu_2", "fail", `{}`),
		use("toolu_3", "echo", `{"text":"three"}`),
		use("toolu_4", "nope", `{}`),
		use("toolu_5", "echo", `{"text":"five"}`),
		use("toolu_6", "fail", `{}`),
	}
	tp := NewTraceparent()
	ctx := WithTraceparent(timeout(t, 10*time.Second), tp)
	wantDeadline, _ := ctx.Deadline()
	res, err := b.d.Dispatch(ctx, "sess-order", calls)
	if err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	want := []struct {
		text    string
		isError bool
		class   envelope.Class
	}{
		{"one", false, ""},
		{"The tool fail failed on purpose.", true, envelope.ClassPermanent},
		{"three", false, ""},
		{"There is no tool named nope", true, envelope.ClassValidation},
		{"five", false, ""},
		{"The tool fail failed on purpose.", true, envelope.ClassPermanent},
	}
	if len(res) != len(want) {
		t.Fatalf("got %d results, want %d", len(res), len(want))
	}
	for i, w := range want {
		r := res[i]
		if r.CallID != calls[i].ID || !strings.HasPrefix(r.Content.Text(), w.text) || r.IsError != w.isError || r.Class != w.class {
			t.Errorf("result %d = {id %q, text %q, is_error %v, class %q}, want {id %q, text %q…, is_error %v, class %q}",
				i, r.CallID, r.Content.Text(), r.IsError, r.Class, calls[i].ID, w.text, w.isError, w.class)
		}
	}

	// What the worker received: the envelope fields and the dedup header.
	seen, hdrs := echo.seen()
	if len(seen) != 3 {
		t.Fatalf("echo worker saw %d calls, want 3", len(seen))
	}
	for i, c := range seen {
		if hdrs[i].Get(js.MsgIDHeader) != c.Key || c.Key != envelope.CallKey("", c.Session, c.ID, c.Tool, c.Input) {
			t.Errorf("call %s: Nats-Msg-Id %q, key %q; want the call key", c.ID, hdrs[i].Get(js.MsgIDHeader), c.Key)
		}
		if c.Session != "sess-order" || c.ReplyTo != "orch-order" || c.Tool != "echo" {
			t.Errorf("call %s: session %q reply_to %q tool %q", c.ID, c.Session, c.ReplyTo, c.Tool)
		}
		if !c.Deadline.Equal(wantDeadline) {
			t.Errorf("call %s: deadline %v, want the ctx deadline %v", c.ID, c.Deadline, wantDeadline)
		}
		if c.CreatedAt.IsZero() || c.CreatedAt.After(c.Deadline) {
			t.Errorf("call %s: created_at %v", c.ID, c.CreatedAt)
		}
		if c.Traceparent != tp {
			t.Errorf("call %s: traceparent %q, want the ctx's %q", c.ID, c.Traceparent, tp)
		}
	}
	if got := b.metrics.get("dispatched", "echo"); got != 3 {
		t.Errorf("CallDispatched(echo) = %d, want 3", got)
	}
	if got := b.metrics.get("received", "fail"); got != 2 {
		t.Errorf("ResultReceived(fail) = %d, want 2", got)
	}
	if got := b.metrics.pending.Load(); got != 0 {
		t.Errorf("pending gauge = %d after the turn, want 0", got)
	}
	// The calls went through the dispatcher's own PubAck table, which the
	// PubAcks emptied.
	if b.d.acks == nil {
		t.Fatal("a dispatcher on a connection has no pubAcks")
	}
	b.d.acks.mu.Lock()
	left := len(b.d.acks.pending)
	b.d.acks.mu.Unlock()
	if left != 0 {
		t.Errorf("%d publishes pending after the turn, want 0", left)
	}
}

func TestDispatchNewTraceparentWhenCtxHasNone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	echo := startWorker(t, b, "echo", echoText)
	ctx := WithTraceparent(timeout(t, 10*time.Second), "not-a-traceparent")
	if _, err := b.d.Dispatch(ctx, "", []envelope.ToolUseBlock{use("a", "echo", `{}`), use("b", "echo", `{}`)}); err != nil {
		t.Fatal(err)
	}
	seen, _ := echo.seen()
	if len(seen) != 2 {
		t.Fatalf("saw %d calls", len(seen))
	}
	for _, c := range seen {
		if !ValidTraceparent(c.Traceparent) {
			t.Errorf("call %s: traceparent %q is not valid", c.ID, c.Traceparent)
		}
	}
	if seen[0].Traceparent != seen[1].Traceparent {
		t.Errorf("calls of one turn carry different traces: %q, %q", seen[0].Traceparent, seen[1].Traceparent)
	}
}

func TestDispatchUnknownToolPublishesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t) // no worker: anything published would stay in TOOL_CALLS
	res, err := b.d.Dispatch(timeout(t, 5*time.Second), "s", []envelope.ToolUseBlock{use("toolu_x", "ehco", `{"text":"hi"}`)})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if !r.IsError || r.Class != envelope.ClassValidation || r.Code != classify.CodeUnknownTool || r.CallID != "toolu_x" {
		t.Errorf("result = %+v, want an unknown_tool validation is_error", r)
	}
	for _, name := range []string{"ehco", "echo", "fail", "maybe", "slow"} {
		if !strings.Contains(r.Content.Text(), name) {
			t.Errorf("content %q does not name %s", r.Content.Text(), name)
		}
	}
	if n := streamMsgs(t, b.js, jetstream.StreamCalls); n != 0 {
		t.Errorf("TOOL_CALLS holds %d messages, want 0", n)
	}
	if got := b.metrics.get("dispatched", "ehco"); got != 0 {
		t.Errorf("CallDispatched = %d", got)
	}
}

func TestDispatchRejectsBadCallsWithoutPublishing(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.MaxInputBytes = 64 })
	tests := []struct {
		name     string
		call     envelope.ToolUseBlock
		contains []string
	}{
		{"empty id", use("", "echo", `{}`), []string{"echo", "id"}},
		{"string input", use("t1", "echo", `"hello"`), []string{"echo", "JSON object"}},
		{"array input", use("t2", "echo", `[1,2]`), []string{"echo", "JSON object"}},
		{"null input", use("t3", "echo", `null`), []string{"echo", "JSON object"}},
		{"broken JSON", use("t4", "echo", `{"text":`), []string{"echo", "JSON"}},
		{"too large", use("t5", "echo", `{"text":"`+strings.Repeat("x", 100)+`"}`), []string{"echo", "limit"}},
		{"control character in id", use("t6\n", "echo", `{}`), []string{"echo", "id"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := b.d.Dispatch(timeout(t, 5*time.Second), "", []envelope.ToolUseBlock{tc.call})
			if err != nil {
				t.Fatal(err)
			}
			r := res[0]
			if !r.IsError || r.Class != envelope.ClassValidation || r.CallID != tc.call.ID || r.Code == "" {
				t.Errorf("result = %+v, want a validation is_error for %q", r, tc.call.ID)
			}
			for _, s := range tc.contains {
				if !strings.Contains(r.Content.Text(), s) {
					t.Errorf("content %q lacks %q", r.Content.Text(), s)
				}
			}
		})
	}
	if n := streamMsgs(t, b.js, jetstream.StreamCalls); n != 0 {
		t.Errorf("TOOL_CALLS holds %d messages, want 0", n)
	}
}

func TestDispatchEmptyInputIsAnEmptyObject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	echo := startWorker(t, b, "echo", echoText)
	res, err := b.d.Dispatch(timeout(t, 5*time.Second), "", []envelope.ToolUseBlock{use("t", "echo", ``)})
	if err != nil || res[0].IsError {
		t.Fatalf("Dispatch = %+v, %v", res, err)
	}
	seen, _ := echo.seen()
	if string(seen[0].Input) != `{}` {
		t.Errorf("input %s, want {}", seen[0].Input)
	}
}

func TestDispatchSameCallTwiceRunsOnce(t *testing.T) {
	t.Parallel()

	t.Run("sequential", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		echo := startWorker(t, b, "echo", echoText)
		call := []envelope.ToolUseBlock{use("toolu_seq", "echo", `{"text":"once"}`)}
		for i := range 3 {
			res, err := b.d.Dispatch(timeout(t, 5*time.Second), "", call)
			if err != nil || res[0].Content.Text() != "once" {
				t.Fatalf("dispatch %d = %+v, %v", i, res, err)
			}
		}
		if n := echo.execs.Load(); n != 1 {
			t.Errorf("executed %d times, want 1", n)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		release := make(chan struct{})
		echo := startWorker(t, b, "echo", func(w *fakeWorker, c *envelope.Call, h nats.Header, r reply) {
			w.Go(func(done <-chan struct{}) {
				select {
				case <-release:
					echoText(w, c, h, r)
				case <-done:
				}
			})
		})
		const n = 5
		var wg sync.WaitGroup
		results := make([][]envelope.Result, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				results[i], errs[i] = b.d.Dispatch(timeout(t, 10*time.Second), "",
					[]envelope.ToolUseBlock{use("toolu_conc", "echo", `{"text":"shared"}`)})
			})
		}
		eventually(t, "every dispatch published", func() bool { return b.metrics.get("dispatched", "echo") == n })
		close(release)
		wg.Wait()
		for i := range n {
			if errs[i] != nil || results[i][0].Content.Text() != "shared" {
				t.Errorf("dispatch %d = %+v, %v", i, results[i], errs[i])
			}
		}
		if got := echo.execs.Load(); got != 1 {
			t.Errorf("executed %d times, want 1", got)
		}
	})

	t.Run("already queued", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Someone (e.g. a previous attempt of this request) queued the call
		// before any worker runs; Dispatch's publish is then a duplicate.
		call := &envelope.Call{
			ID: "toolu_q", Tool: "echo", Input: []byte(`{"text":"queued"}`), ReplyTo: b.d.Instance(),
			CreatedAt: time.Now(), Deadline: time.Now().Add(time.Minute),
		}
		data, err := envelope.EncodeCall(call)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.js.PublishMsg(context.Background(), &nats.Msg{
			Subject: jetstream.CallSubject("echo"), Data: data, Header: nats.Header{js.MsgIDHeader: {call.Key}},
		}); err != nil {
			t.Fatal(err)
		}
		type out struct {
			res []envelope.Result
			err error
		}
		done := make(chan out, 1)
		go func() {
			res, err := b.d.Dispatch(timeout(t, 10*time.Second), "", []envelope.ToolUseBlock{use("toolu_q", "echo", `{"text":"queued"}`)})
			done <- out{res, err}
		}()
		eventually(t, "the duplicate publish", func() bool { return b.metrics.get("dispatched", "echo") == 1 })
		if n := streamMsgs(t, b.js, jetstream.StreamCalls); n != 1 {
			t.Errorf("TOOL_CALLS holds %d messages, want 1", n)
		}
		echo := startWorker(t, b, "echo", echoText)
		o := <-done
		if o.err != nil || o.res[0].Content.Text() != "queued" {
			t.Fatalf("Dispatch = %+v, %v", o.res, o.err)
		}
		if got := echo.execs.Load(); got != 1 {
			t.Errorf("executed %d times, want 1", got)
		}
	})
}

func TestDispatchResultDeliveredTwice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startWorker(t, b, "echo", func(_ *fakeWorker, c *envelope.Call, _ nats.Header, r reply) {
		r(&envelope.Result{Content: envelope.Text("first")}, msgID(c))
		r(&envelope.Result{Content: envelope.Text("first, again")}, msgID(c)) // deduplicated by the stream
		r(&envelope.Result{Content: envelope.Text("second")}, "")             // a re-execution past the dedup window
	})
	res, err := b.d.Dispatch(timeout(t, 5*time.Second), "", []envelope.ToolUseBlock{use("toolu_dup", "echo", `{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := res[0].Content.Text(); got != "first" {
		t.Errorf("content %q, want the first result", got)
	}
	eventually(t, "the duplicate counted", func() bool { return b.metrics.get("duplicate", "echo") == 1 })
	if got := b.metrics.get("received", "echo"); got != 1 {
		t.Errorf("ResultReceived = %d, want 1", got)
	}
	if got := streamMsgs(t, b.js, jetstream.StreamResults); got != 2 {
		t.Errorf("TOOL_RESULTS holds %d messages, want 2 (one deduplicated by Nats-Msg-Id)", got)
	}
}

func TestDispatchDeadline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		ctx      func(t *testing.T) context.Context
		timeout  time.Duration // Config.DefaultTimeout
		wantWait string
	}{
		{"ctx deadline", func(t *testing.T) context.Context { return timeout(t, time.Second) }, time.Minute, "1s"},
		{"default timeout", func(*testing.T) context.Context { return context.Background() }, 800 * time.Millisecond, "800ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *Config) { c.DefaultTimeout = tc.timeout })
			late := make(chan struct{})
			slow := startWorker(t, b, "slow", func(w *fakeWorker, c *envelope.Call, h nats.Header, r reply) {
				w.Go(func(done <-chan struct{}) {
					select {
					case <-late:
						r(&envelope.Result{Content: envelope.Text("too late")}, msgID(c))
					case <-done:
					}
				})
			})
			startWorker(t, b, "echo", echoText)
			start := time.Now()
			res, err := b.d.Dispatch(tc.ctx(t), "", []envelope.ToolUseBlock{
				use("toolu_slow", "slow", `{}`), use("toolu_fast", "echo", `{"text":"fast"}`),
			})
			if err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); el > 3*time.Second {
				t.Errorf("Dispatch took %v", el)
			}
			r := res[0]
			if !r.IsError || r.Class != envelope.ClassTransient || r.Code != classify.CodeDeadline {
				t.Errorf("slow result = %+v, want a deadline is_error", r)
			}
			text := r.Content.Text()
			if !strings.Contains(text, "slow") || !strings.Contains(text, tc.wantWait) {
				t.Errorf("content %q does not name the tool and the wait %s", text, tc.wantWait)
			}
			if res[1].IsError || res[1].Content.Text() != "fast" {
				t.Errorf("fast result = %+v", res[1])
			}
			if got := b.metrics.get("expired", "slow"); got != 1 {
				t.Errorf("Expired(slow) = %d, want 1", got)
			}
			eventually(t, "the worker to take the call", func() bool { return slow.execs.Load() == 1 })
			close(late)
			eventually(t, "the late result counted", func() bool { return b.metrics.get("late", "slow") == 1 })
			if got := b.metrics.get("duplicate", "slow"); got != 0 {
				t.Errorf("a late result was counted as duplicate")
			}
		})
	}
}

func TestDispatchRepeatedFailureAdvice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startWorker(t, b, "maybe", maybeFail)
	startWorker(t, b, "echo", echoText)
	n := 0
	dispatch := func(session string, calls ...envelope.ToolUseBlock) []envelope.Result {
		t.Helper()
		for i := range calls {
			n++
			calls[i].ID = fmt.Sprintf("toolu_%d", n)
		}
		res, err := b.d.Dispatch(timeout(t, 5*time.Second), session, calls)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	fail := func() envelope.ToolUseBlock { return use("", "maybe", `{"ok":false}`) }
	ok := func() envelope.ToolUseBlock { return use("", "maybe", `{"ok":true}`) }
	echo := func() envelope.ToolUseBlock { return use("", "echo", `{"text":"x"}`) }
	advised := func(r envelope.Result) bool { return strings.Contains(r.Content.Text(), "different approach") }
	check := func(step string, r envelope.Result, wantAdvice bool, wantRun int) {
		t.Helper()
		if advised(r) != wantAdvice {
			t.Errorf("%s: advice = %v, want %v (content %q)", step, advised(r), wantAdvice, r.Content.Text())
		}
		if wantAdvice && !strings.Contains(r.Content.Text(), classify.RepeatedFailureMessage("maybe", wantRun)) {
			t.Errorf("%s: content %q lacks %q", step, r.Content.Text(), classify.RepeatedFailureMessage("maybe", wantRun))
		}
		if wantAdvice && !strings.HasPrefix(r.Content.Text(), "The tool maybe failed. ") {
			t.Errorf("%s: the advice must follow the tool's own content: %q", step, r.Content.Text())
		}
	}

	check("s1 fail 1", dispatch("s1", fail())[0], false, 1)
	check("s1 fail 2", dispatch("s1", fail())[0], false, 2)
	check("s2 fail 1", dispatch("s2", fail())[0], false, 1) // other sessions are unaffected
	dispatch("s1", echo())                                  // another tool's success does not reset maybe
	check("s1 fail 3", dispatch("s1", fail())[0], true, 3)
	check("s1 fail 4", dispatch("s1", fail())[0], true, 4)
	check("s2 fail 2", dispatch("s2", fail())[0], false, 2)
	if r := dispatch("s1", ok())[0]; r.IsError || advised(r) {
		t.Errorf("success = %+v", r)
	}
	check("s1 fail after success", dispatch("s1", fail())[0], false, 1)

	// Three failures in one turn: the third gets the advice.
	res := dispatch("s3", fail(), fail(), fail())
	check("s3 turn call 1", res[0], false, 1)
	check("s3 turn call 2", res[1], false, 2)
	check("s3 turn call 3", res[2], true, 3)

	// An empty session is not tracked.
	for i := range 4 {
		check(fmt.Sprintf("no session %d", i), dispatch("", fail())[0], false, 0)
	}

	// Unknown tools count too, and are answered without publishing.
	var last envelope.Result
	for range 3 {
		last = dispatch("s4", use("", "nope", `{}`))[0]
	}
	if !advised(last) || !strings.Contains(last.Content.Text(), "There is no tool named nope") {
		t.Errorf("third unknown-tool call: %q", last.Content.Text())
	}
}

func TestDispatchConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startWorker(t, b, "echo", echoText)
	startWorker(t, b, "fail", alwaysFail)
	const goroutines = 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			calls := []envelope.ToolUseBlock{
				use(fmt.Sprintf("g%d-a", g), "echo", fmt.Sprintf(`{"text":"g%d-a"}`, g)),
				use(fmt.Sprintf("g%d-b", g), "fail", `{}`),
				use(fmt.Sprintf("g%d-c", g), "echo", fmt.Sprintf(`{"text":"g%d-c"}`, g)),
			}
			res, err := b.d.Dispatch(timeout(t, 30*time.Second), fmt.Sprintf("s%d", g), calls)
			if err != nil {
				t.Errorf("goroutine %d: %v", g, err)
				return
			}
			for i, want := range []string{fmt.Sprintf("g%d-a", g), "", fmt.Sprintf("g%d-c", g)} {
				if res[i].CallID != calls[i].ID {
					t.Errorf("goroutine %d result %d: call id %q", g, i, res[i].CallID)
				}
				if want != "" && (res[i].IsError || res[i].Content.Text() != want) {
					t.Errorf("goroutine %d result %d: %+v, want %q", g, i, res[i], want)
				}
				if want == "" && !res[i].IsError {
					t.Errorf("goroutine %d result %d: not an error", g, i)
				}
			}
		})
	}
	wg.Wait()
	pending, settled := b.d.calls.stats()
	if pending != 0 || settled != 3*goroutines {
		t.Errorf("call table: %d pending, %d settled; want 0, %d", pending, settled, 3*goroutines)
	}
	if got := b.metrics.pending.Load(); got != 0 {
		t.Errorf("pending gauge = %d, want 0", got)
	}
}

func TestStopFailsWaitersPromptly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startWorker(t, b, "slow", func(*fakeWorker, *envelope.Call, nats.Header, reply) {}) // never answers
	errc := make(chan error, 1)
	go func() {
		_, err := b.d.Dispatch(context.Background(), "", []envelope.ToolUseBlock{use("toolu_s", "slow", `{}`)})
		errc <- err
	}()
	eventually(t, "the call to be published", func() bool { return b.metrics.get("dispatched", "slow") == 1 })
	start := time.Now()
	stopNow(b.d)
	select {
	case err := <-errc:
		if !errors.Is(err, ErrStopped) || !errors.Is(err, ErrUnavailable) {
			t.Errorf("err = %v, want ErrStopped and ErrUnavailable", err)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("Dispatch returned %v after Stop", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Dispatch still waits after Stop")
	}
	if _, err := b.d.Dispatch(context.Background(), "", []envelope.ToolUseBlock{use("toolu_t", "slow", `{}`)}); !errors.Is(err, ErrStopped) {
		t.Errorf("Dispatch after Stop: err = %v, want ErrStopped", err)
	}
	if err := b.d.Start(context.Background()); !errors.Is(err, ErrStopped) {
		t.Errorf("Start after Stop: err = %v, want ErrStopped", err)
	}
	stopNow(b.d) // idempotent
}

func TestDispatchCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startWorker(t, b, "slow", func(*fakeWorker, *envelope.Call, nats.Header, reply) {})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := b.d.Dispatch(ctx, "", []envelope.ToolUseBlock{use("toolu_c", "slow", `{}`)})
		errc <- err
	}()
	eventually(t, "the call to be published", func() bool { return b.metrics.get("dispatched", "slow") == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if pending, settled := b.d.calls.stats(); pending != 0 || settled != 1 {
		t.Errorf("call table: %d pending, %d settled; want 0, 1", pending, settled)
	}
	if got := b.metrics.pending.Load(); got != 0 {
		t.Errorf("pending gauge = %d, want 0", got)
	}
}

func TestDispatchUnavailable(t *testing.T) {
	t.Parallel()

	t.Run("not started", func(t *testing.T) {
		t.Parallel()
		_, _, j := natstest.StartProvisioned(t)
		d, err := New(Config{JS: j, Catalog: discovery.StaticCatalog("echo")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Dispatch(context.Background(), "", []envelope.ToolUseBlock{use("a", "echo", `{}`)}); !errors.Is(err, ErrUnavailable) {
			t.Errorf("err = %v, want ErrUnavailable", err)
		}
	})

	// Without TOOL_CALLS publishes get no responders, as while a stream
	// leader is elected: retried until PublishRetryFor is spent.
	t.Run("no stream", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *Config) {
			c.PublishTimeout = time.Second
			c.PublishRetryFor = 1500 * time.Millisecond
		})
		if err := b.js.DeleteStream(context.Background(), jetstream.StreamCalls); err != nil {
			t.Fatal(err)
		}
		res, err := b.d.Dispatch(timeout(t, 10*time.Second), "", []envelope.ToolUseBlock{
			use("a", "echo", `{}`), use("b", "nope", `{}`),
		})
		if !errors.Is(err, ErrUnavailable) || res != nil {
			t.Errorf("Dispatch = %v, %v; want ErrUnavailable", res, err)
		}
		if pending, _ := b.d.calls.stats(); pending != 0 {
			t.Errorf("%d calls still pending", pending)
		}
		if got := b.metrics.pending.Load(); got != 0 {
			t.Errorf("pending gauge = %d, want 0", got)
		}
		if n := len(b.d.inflight); n != 0 {
			t.Errorf("%d publish slots still taken", n)
		}
	})

	t.Run("server gone, no retries", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *Config) {
			c.PublishTimeout = 300 * time.Millisecond
			c.PublishRetryFor = -1
		})
		// Restarted when the test ends, so that the dispatcher stops
		// against a live server.
		t.Cleanup(serverDown(t, b))
		start := time.Now()
		_, err := b.d.Dispatch(timeout(t, 10*time.Second), "", []envelope.ToolUseBlock{use("a", "echo", `{}`)})
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("err = %v, want ErrUnavailable", err)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("Dispatch took %v, want about PublishTimeout", el)
		}
	})
}

func TestDispatchWithFewPublishSlots(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.MaxPublishInFlight = 2 })
	startWorker(t, b, "echo", echoText)
	turn := func(prefix string, n int) []envelope.ToolUseBlock {
		calls := make([]envelope.ToolUseBlock, n)
		for i := range calls {
			calls[i] = use(fmt.Sprintf("%s_%d", prefix, i), "echo", fmt.Sprintf(`{"text":"%s %d"}`, prefix, i))
		}
		return calls
	}
	check := func(prefix string, res []envelope.Result, err error) {
		if err != nil {
			t.Errorf("%s: %v", prefix, err)
			return
		}
		for i, r := range res {
			if want := fmt.Sprintf("%s %d", prefix, i); r.Content.Text() != want {
				t.Errorf("%s result %d = %q, want %q", prefix, i, r.Content.Text(), want)
			}
		}
	}
	// One turn larger than the slots must not block itself.
	res, err := b.d.Dispatch(timeout(t, 10*time.Second), "", turn("big", 25))
	check("big", res, err)
	// Many turns share the slots.
	var wg sync.WaitGroup
	for g := range 20 {
		wg.Go(func() {
			prefix := fmt.Sprint("g", g)
			res, err := b.d.Dispatch(timeout(t, 20*time.Second), "", turn(prefix, 5))
			check(prefix, res, err)
		})
	}
	wg.Wait()
	if n := len(b.d.inflight); n != 0 {
		t.Errorf("%d publish slots still taken", n)
	}
}

func TestDispatchBlocks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startWorker(t, b, "echo", echoText)
	blocks, err := b.d.DispatchBlocks(timeout(t, 5*time.Second), "", []envelope.ToolUseBlock{
		use("toolu_a", "echo", `{"text":"hi"}`), use("toolu_b", "nope", `{}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if blocks[0].Type != "tool_result" || blocks[0].ToolUseID != "toolu_a" || blocks[0].IsError || blocks[0].Content.Text() != "hi" {
		t.Errorf("block 0 = %+v", blocks[0])
	}
	if blocks[1].ToolUseID != "toolu_b" || !blocks[1].IsError {
		t.Errorf("block 1 = %+v", blocks[1])
	}
}

func TestStartTwice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.d.Start(context.Background()); err == nil {
		t.Error("second Start succeeded")
	}
}

// A dispatcher not started refuses turns as unavailable; stopped before it
// was started, it refuses them as stopped and cannot be started; Stopped
// is closed.
func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	d, err := New(Config{JS: &loopbackJS{}, Instance: "never", Catalog: discovery.StaticCatalog("echo")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Dispatch(context.Background(), "", []envelope.ToolUseBlock{use("toolu_n", "echo", `{}`)}); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrStopped) {
		t.Errorf("Dispatch before Start = %v, want ErrUnavailable and not ErrStopped", err)
	}
	if err := d.Stop(context.Background()); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	<-d.Stopped()
	if _, err := d.Dispatch(context.Background(), "", []envelope.ToolUseBlock{use("toolu_n", "echo", `{}`)}); !errors.Is(err, ErrStopped) || !errors.Is(err, ErrUnavailable) {
		t.Errorf("Dispatch after Stop = %v, want ErrStopped and ErrUnavailable", err)
	}
	if err := d.Start(context.Background()); !errors.Is(err, ErrStopped) {
		t.Errorf("Start after Stop = %v, want ErrStopped", err)
	}
}

// The failure run behind the advice sentence is counted per tenant and
// session: another tenant's session of the same name starts from zero.
func TestAdviceIsScopedByTenant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startWorker(t, b, "maybe", maybeFail)
	n := 0
	failIn := func(ctx context.Context) envelope.Result {
		t.Helper()
		n++
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		res, err := b.d.Dispatch(ctx, "s1", []envelope.ToolUseBlock{use(fmt.Sprintf("toolu_%d", n), "maybe", `{"ok":false}`)})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	acme := WithTenant(context.Background(), "acme")
	for range 2 {
		failIn(acme)
	}
	if r := failIn(acme); !strings.Contains(r.Content.Text(), classify.RepeatedFailureMessage("maybe", 3)) {
		t.Errorf("third failure in acme/s1: content %q; want the advice", r.Content.Text())
	}
	if r := failIn(WithTenant(context.Background(), "globex")); strings.Contains(r.Content.Text(), "different approach") {
		t.Errorf("first failure in globex/s1 got advice: %q", r.Content.Text())
	}
	if r := failIn(context.Background()); strings.Contains(r.Content.Text(), "different approach") {
		t.Errorf("first failure in the default tenant's s1 got advice: %q", r.Content.Text())
	}
}

// Stop drains: a turn in progress gets its result when it comes before
// Stop's ctx ends, while a turn begun after Stop fails at once; Stopped is
// closed when Stop returns.
func TestStopDrainsTurnsInProgress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	startWorker(t, b, "slow", func(w *fakeWorker, c *envelope.Call, h nats.Header, reply reply) {
		w.Go(func(done <-chan struct{}) {
			select {
			case <-release:
			case <-done:
				return
			}
			echoText(w, c, h, reply)
		})
	})
	type turn struct {
		res []envelope.Result
		err error
	}
	got := make(chan turn, 1)
	go func() {
		res, err := b.d.Dispatch(timeout(t, 30*time.Second), "", []envelope.ToolUseBlock{use("toolu_slow_held", "slow", `{"text":"kept"}`)})
		got <- turn{res, err}
	}()
	eventually(t, "the call to be published", func() bool { return b.metrics.get("dispatched", "slow") == 1 })
	stopped := make(chan error, 1)
	go func() { stopped <- b.d.Stop(timeout(t, 30*time.Second)) }()
	eventually(t, "Stop to refuse new turns", func() bool {
		_, err := b.d.Dispatch(timeout(t, time.Second), "", []envelope.ToolUseBlock{use("toolu_late", "slow", `{}`)})
		return errors.Is(err, ErrStopped)
	})
	select {
	case <-b.d.Stopped():
		t.Fatal("Stopped closed while a turn was still in progress")
	default:
	}
	close(release)
	tr := <-got
	if tr.err != nil || len(tr.res) != 1 || tr.res[0].IsError || tr.res[0].Content.Text() != "kept" {
		t.Errorf("the turn in progress during Stop = %+v, %v; want its result", tr.res, tr.err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Stop = %v; want nil (every turn ended in time)", err)
	}
	<-b.d.Stopped()
}

// A call cancelled on one orchestrator while queued, then sent again
// through another within the duplicate window, runs: the other takes the
// duplicate for what it is (the message gone, no result stored) and
// publishes the call again under a Msg-Id of its own, instead of waiting
// until the deadline for a result that never comes.
func TestCancelledCallSentAgainThroughAnotherOrchestratorRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := Config{JS: b.js, Catalog: discovery.StaticCatalog("echo"), Logger: b.d.log, Instance: "orch-other"}
	d2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopNow(d2) })
	calls, err := b.js.Stream(context.Background(), jetstream.StreamCalls)
	if err != nil {
		t.Fatal(err)
	}
	queued := func() uint64 {
		info, err := calls.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}

	// No worker yet: the call waits in TOOL_CALLS until its caller gives up.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	call := []envelope.ToolUseBlock{use("toolu_again", "echo", `{"text":"ran"}`)}
	go func() {
		_, err := b.d.Dispatch(ctx, "s", call)
		errc <- err
	}()
	eventually(t, "the call to be queued", func() bool { return queued() == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled Dispatch: %v", err)
	}
	eventually(t, "the cancelled call to leave TOOL_CALLS", func() bool { return queued() == 0 })

	startWorker(t, b, "echo", echoText)
	res, err := d2.Dispatch(timeout(t, 20*time.Second), "s", call)
	if err != nil {
		t.Fatal(err)
	}
	if r := res[0]; r.IsError || r.Content.Text() != "ran" {
		t.Fatalf("the call sent again through another orchestrator: %+v (%s), want it run", r, r.Content.Text())
	}
}
