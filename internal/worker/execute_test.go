package worker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// executed is what execute returned.
type executed struct {
	out                  tools.Output
	err                  error
	panicked, handedBack bool
}

// executeOne runs handler through execute with an AbandonGrace of an hour,
// the call cancelled by its caller first when cancelled is set. It fails
// the test when execute has not returned after a minute (a hang, not a
// measure of speed).
func executeOne(t *testing.T, timeout time.Duration, cancelled bool, handler tools.Handler) executed {
	t.Helper()
	reg := tools.NewRegistry()
	if err := reg.Register(tools.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`),
		Timeout: timeout, Idempotent: true, Handler: handler}); err != nil {
		t.Fatal(err)
	}
	w, err := New(Config{JetStream: nopJS{}, Registry: reg, WorkerID: "w1",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), AbandonGrace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.pool.close)
	rt, _ := reg.Lookup("t")
	j := &job{msg: &benchMsg{}, served: &served{tool: rt, heartbeat: time.Hour}, w: w,
		call: &envelope.Call{ID: "toolu_1", Tool: "t", Input: []byte(`{}`)}}
	j.cancelled.Store(cancelled)
	got := make(chan executed, 1)
	go func() {
		var e executed
		e.out, e.err, e.panicked, e.handedBack = w.execute(j, j.call)
		got <- e
	}()
	select {
	case e := <-got:
		return e
	case <-time.After(time.Minute):
		t.Fatal("execute did not return after its handler did")
		return executed{}
	}
}

// A handler that returns once its context is cancelled (by the timeout,
// or by the caller before it started) is not abandoned: execute returns
// what it returned, its bare context error replaced by the cause, without
// waiting for AbandonGrace.
func TestExecuteTakesOutcomeAfterCancellation(t *testing.T) {
	t.Parallel()
	late := func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
		<-ctx.Done()
		return tools.Text("late"), ctx.Err()
	}
	e := executeOne(t, 20*time.Millisecond, false, late)
	var te *classify.TimeoutError
	if !errors.As(e.err, &te) || e.panicked || e.handedBack {
		t.Errorf("timed out: err %v, panicked %v, handed back %v; want a *classify.TimeoutError", e.err, e.panicked, e.handedBack)
	}
	if len(e.out.Content) != 1 || e.out.Content[0].Text != "late" {
		t.Errorf("timed out: output %+v; want the handler's", e.out)
	}
	e = executeOne(t, time.Hour, true, late)
	if !errors.Is(e.err, ErrCancelled) || e.panicked || e.handedBack {
		t.Errorf("cancelled first: err %v, panicked %v, handed back %v; want ErrCancelled", e.err, e.panicked, e.handedBack)
	}
}

// A handler's own error and a panic come back from execute as they were
// returned; a context error returned while the context was not cancelled
// stays that error.
func TestExecuteOutcomes(t *testing.T) {
	t.Parallel()
	e := executeOne(t, time.Hour, false, func(context.Context, json.RawMessage) (tools.Output, error) {
		return tools.Text("ok"), nil
	})
	if e.err != nil || len(e.out.Content) != 1 || e.out.Content[0].Text != "ok" {
		t.Errorf("success: %+v", e)
	}
	e = executeOne(t, time.Hour, false, func(context.Context, json.RawMessage) (tools.Output, error) {
		return tools.Output{}, context.Canceled
	})
	if e.err != context.Canceled {
		t.Errorf("a context error of its own: %v; want context.Canceled as returned", e.err)
	}
	e = executeOne(t, time.Hour, false, func(context.Context, json.RawMessage) (tools.Output, error) {
		panic("boom")
	})
	var pe *classify.PanicError
	if !e.panicked || !errors.As(e.err, &pe) {
		t.Errorf("panic: panicked %v, err %v; want a *classify.PanicError", e.panicked, e.err)
	}
}
