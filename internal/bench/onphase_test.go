package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// OnPhase is told of every phase's start and measurement, in order, and
// an error it returns ends the run with that error.
func TestOnPhase(t *testing.T) {
	t.Parallel()
	var got []string
	rep := run(t, Config{Calls: 40, Concurrency: 4, Warmup: 8, OnPhase: func(_ context.Context, ev PhaseEvent, name string, round int) error {
		got = append(got, fmt.Sprintf("%s %d %d", name, round, ev))
		return nil
	}})
	want := []string{"baseline 1 0", "baseline 1 1", "baseline 1 2", "pool 1 0", "pool 1 1", "pool 1 2"}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if rep.Pool.Calls != 40 {
		t.Errorf("pool: %d calls, want 40", rep.Pool.Calls)
	}

	stop := errors.New("stop here")
	_, err := Run(context.Background(), Config{Calls: 40, Concurrency: 4, Warmup: -1, OnPhase: func(_ context.Context, ev PhaseEvent, name string, _ int) error {
		if name == PhasePool && ev == PhaseStarting {
			return stop
		}
		return nil
	}})
	if !errors.Is(err, stop) {
		t.Errorf("Run with OnPhase failing: %v, want %v", err, stop)
	}
}
