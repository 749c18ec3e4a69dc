package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// progressTool reports progress 1..steps, every's apart, then waits one
// more every and answers "done".
func progressTool(runs *atomic.Int64) tools.Tool {
	return tools.Tool{
		Name:        "steps",
		Description: "reports its progress",
		InputSchema: anySchema,
		Timeout:     time.Minute,
		Retry:       fastRetry,
		Handler: func(ctx context.Context, in json.RawMessage) (tools.Output, error) {
			runs.Add(1)
			var args struct {
				Steps   int `json:"steps"`
				EveryMS int `json:"every_ms"`
			}
			if err := json.Unmarshal(in, &args); err != nil {
				return tools.Output{}, classify.Permanent(err)
			}
			every := time.Duration(args.EveryMS) * time.Millisecond
			for i := 1; i <= args.Steps; i++ {
				tools.ReportProgress(ctx, tools.Progress{Progress: float64(i), Total: float64(args.Steps), Message: "step"})
				select {
				case <-time.After(every):
				case <-ctx.Done():
					return tools.Output{}, ctx.Err()
				}
			}
			return tools.Text("done"), nil
		},
	}
}

// progressLog collects the reports a Dispatch's ProgressFunc gets.
type progressLog struct {
	mu      sync.Mutex
	ids     []string
	reports []tools.Progress
}

func (l *progressLog) add(id string, p tools.Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids = append(l.ids, id)
	l.reports = append(l.reports, p)
}

func (l *progressLog) get() ([]string, []tools.Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...), append([]tools.Progress(nil), l.reports...)
}

// A tool's progress reports reach the ProgressFunc of the Dispatch that
// asked for them, in order, with the call's tool_use id.
func TestProgressReachesCaller(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	p := newPool(t, progressTool(&runs))
	p.startWorker()

	var log progressLog
	b := toolUse("steps", `{"steps":5,"every_ms":150}`)
	ctx, cancel := context.WithTimeout(dispatch.WithProgress(context.Background(), log.add), waitLong)
	defer cancel()
	res, err := p.d.Dispatch(ctx, "", []envelope.ToolUseBlock{b})
	if err != nil || res[0].IsError || res[0].Content.Text() != "done" {
		t.Fatalf("Dispatch = %+v, %v", res, err)
	}
	ids, reports := log.get()
	if len(reports) != 5 {
		t.Fatalf("got %d reports %+v; want 5 (they came 150 ms apart, over the 100 ms limit)", len(reports), reports)
	}
	for i, r := range reports {
		if r.Progress != float64(i+1) || r.Total != 5 || r.Message != "step" || ids[i] != b.ID {
			t.Errorf("report %d = %s %+v; want %s progress %d of 5", i, ids[i], r, b.ID, i+1)
		}
	}

	// Without WithProgress the same tool's reports go nowhere, and the
	// call is unaffected.
	if r := p.call("steps", `{"steps":3,"every_ms":10}`); r.IsError || r.Content.Text() != "done" {
		t.Errorf("a call without progress: %+v", r)
	}
}

// A tool that reports progress for longer than the consumer's AckWait (1 s
// here) is not delivered again: it runs once, and its reports, many more
// than the rate limit lets through, arrive in order, at most one per
// 100 ms. (The last one is sent before the result, but the dispatcher
// drops a report that it handles after the call's result.)
func TestProgressKeepsLongCallAlive(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	p := newPool(t, progressTool(&runs))
	rec := newRecordingMetrics()
	p.startWorker(func(c *worker.Config) { c.AckWait = time.Second; c.Metrics = rec })

	var log progressLog
	b := toolUse("steps", `{"steps":150,"every_ms":20}`) // 3 s of reports
	ctx, cancel := context.WithTimeout(dispatch.WithProgress(context.Background(), log.add), waitLong)
	defer cancel()
	start := time.Now()
	res, err := p.d.Dispatch(ctx, "", []envelope.ToolUseBlock{b})
	elapsed := time.Since(start)
	if err != nil || res[0].IsError || res[0].Content.Text() != "done" || res[0].Attempts != 1 {
		t.Fatalf("Dispatch = %+v, %v; want one attempt answering done", res, err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
	eventually(t, "the worker observes the call", func() bool { return len(rec.all()) > 0 })
	if evs := rec.all(); len(evs) != 1 || evs[0].Outcome != classify.FateSuccess || evs[0].Attempt != 1 {
		t.Errorf("worker events %+v; want one successful first attempt", evs)
	}
	cons, err := p.js.Consumer(ctx, jetstream.StreamCalls, jetstream.ConsumerName("steps"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumRedelivered != 0 || info.Delivered.Consumer != 1 {
		t.Errorf("consumer delivered %d, redelivered %d; want 1 delivery", info.Delivered.Consumer, info.NumRedelivered)
	}

	_, reports := log.get()
	if len(reports) == 0 {
		t.Fatal("no progress report arrived")
	}
	if limit := int(elapsed/(100*time.Millisecond)) + 2; len(reports) > limit || len(reports) >= 150 {
		t.Errorf("%d reports in %v; the limit lets at most %d through", len(reports), elapsed, limit)
	}
	for i := 1; i < len(reports); i++ {
		if reports[i].Progress <= reports[i-1].Progress {
			t.Errorf("report %d (%v) after %v: out of order", i, reports[i].Progress, reports[i-1].Progress)
		}
	}
	if len(reports) < 2 {
		t.Errorf("%d reports in %v; want one every 100 ms", len(reports), elapsed)
	}
}

// A cancelled call's context also stops its progress: nothing arrives
// after the Dispatch returned.
func TestProgressOfCancelledCall(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	p := newPool(t, progressTool(&runs))
	p.startWorker()

	var log progressLog
	ctx, cancel := context.WithCancel(dispatch.WithProgress(context.Background(), log.add))
	defer cancel()
	turn := p.dispatchAsync(ctx, toolUse("steps", `{"steps":1000,"every_ms":50}`))
	eventually(t, "a first report", func() bool { _, r := log.get(); return len(r) > 0 })
	cancel()
	tr := <-turn
	if !errors.Is(tr.err, context.Canceled) {
		t.Fatalf("Dispatch = %v; want cancelled", tr.err)
	}
	p.callsCleared(t)
	if n := runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

// callsCleared waits until TOOL_CALLS holds nothing.
func (p *pool) callsCleared(t *testing.T) {
	t.Helper()
	eventually(t, "TOOL_CALLS empty", func() bool { return streamState(t, p.js, jetstream.StreamCalls).Msgs == 0 })
}
