package dlq

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// ReplayResults waits for the results of replayed calls. Start it with
// WatchReplayResults before Replay, with the ReplayConfig.ReplyTo the
// replay publishes under; Expect each call Replay republished; Wait; Stop.
//
// It takes the results with the dispatcher's own result consumer
// (dispatch.ConsumeResults), from the end of TOOL_RESULTS.
type ReplayResults struct {
	rc *dispatch.ResultConsumer

	mu       sync.Mutex
	expected map[string]Replayed         // by new call id, not yet answered
	got      map[string]*envelope.Result // by call id, the first result
	arrived  chan struct{}               // signalled on each result
}

// WatchReplayResults starts consuming the results published for instance
// (tools.result.<instance>.>), from after the last result stored now.
func WatchReplayResults(ctx context.Context, j js.JetStream, instance string) (*ReplayResults, error) {
	w := &ReplayResults{
		expected: map[string]Replayed{}, got: map[string]*envelope.Result{}, arrived: make(chan struct{}, 1),
	}
	rc, err := dispatch.ConsumeResults(ctx, j, dispatch.ResultConsumerConfig{
		Name: "replay_" + instance, Instance: instance, Handler: w.handle,
	})
	if err != nil {
		return nil, fmt.Errorf("dlq: replay results: %w", err)
	}
	w.rc = rc
	return w, nil
}

func (w *ReplayResults) handle(m js.Msg) {
	res, err := envelope.DecodeResult(m.Data())
	if err != nil {
		return
	}
	w.mu.Lock()
	if _, dup := w.got[res.CallID]; !dup {
		w.got[res.CallID] = res
	}
	w.mu.Unlock()
	select {
	case w.arrived <- struct{}{}:
	default:
	}
}

// Expect adds a replayed call to those Wait waits for; a letter Replay
// skipped (r.Err set) is not. It fits as Replay's report function.
func (w *ReplayResults) Expect(r Replayed) {
	if r.Err != nil || r.NewID == "" {
		return
	}
	w.mu.Lock()
	w.expected[r.NewID] = r
	w.mu.Unlock()
}

// Wait hands fn each expected call's result as it arrives (in call id
// order among those ready together), until all are in or timeout passes
// without them; then fn gets each call left with a nil result. It returns
// how many calls did not succeed: an is_error result, none in time, or ctx
// ended first (those get no fn call).
func (w *ReplayResults) Wait(ctx context.Context, timeout time.Duration, fn func(Replayed, *envelope.Result)) int {
	failed := 0
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		w.mu.Lock()
		var ready []*envelope.Result
		for id := range w.expected {
			if res, ok := w.got[id]; ok {
				ready = append(ready, res)
			}
		}
		slices.SortFunc(ready, func(a, b *envelope.Result) int { return strings.Compare(a.CallID, b.CallID) })
		for _, res := range ready {
			r := w.expected[res.CallID]
			delete(w.expected, res.CallID)
			if res.IsError {
				failed++
			}
			fn(r, res)
		}
		left := len(w.expected)
		w.mu.Unlock()
		if left == 0 {
			return failed
		}
		select {
		case <-w.arrived:
		case <-t.C:
			w.mu.Lock()
			defer w.mu.Unlock()
			for _, r := range w.expected {
				failed++
				fn(r, nil)
			}
			return failed
		case <-ctx.Done():
			return failed + left
		}
	}
}

// Stop stops consuming and deletes the consumer.
func (w *ReplayResults) Stop() {
	w.rc.Stop()
	w.rc.Delete()
}
