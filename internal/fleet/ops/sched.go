package ops

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/jetstream"
)

// Defaults of SchedStatsOptions.
const (
	// SchedStatsWindowDefault is how long SchedStats collects answers at
	// most.
	SchedStatsWindowDefault = 300 * time.Millisecond
	// SchedStatsIdleDefault ends the collection early once no answer came
	// for this long after the last one.
	SchedStatsIdleDefault = 100 * time.Millisecond
)

// ErrNoOrchestrator is SchedStats's error when no orchestrator answered:
// none runs, or none has a scheduler of fair shares (an older version).
var ErrNoOrchestrator = errors.New("no orchestrator answered")

// SchedStatsOptions adjust SchedStats. Zero fields take the defaults.
type SchedStatsOptions struct {
	// Window bounds the collection. Default SchedStatsWindowDefault.
	Window time.Duration
	// Idle ends it once no answer came for this long after the last one.
	// Default SchedStatsIdleDefault.
	Idle time.Duration
}

// SchedStats asks every orchestrator for its scheduler's state (a request
// on jetstream.SchedStatsSubject, answered with a JSON sched.Snapshot by
// each) and returns the snapshots that came within the window, sorted by
// instance. It returns ErrNoOrchestrator when none came; an answer that
// is not a snapshot is an error.
func SchedStats(ctx context.Context, nc *nats.Conn, opts SchedStatsOptions) ([]sched.Snapshot, error) {
	window := cmp.Or(opts.Window, SchedStatsWindowDefault)
	idle := cmp.Or(opts.Idle, SchedStatsIdleDefault)
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("ops: scheduler stats: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(jetstream.SchedStatsSubject, inbox, nil); err != nil {
		return nil, fmt.Errorf("ops: scheduler stats: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	var snaps []sched.Snapshot
	for {
		wait, cancelWait := ctx, context.CancelFunc(func() {})
		if len(snaps) > 0 {
			wait, cancelWait = context.WithTimeout(ctx, idle)
		}
		msg, err := sub.NextMsgWithContext(wait)
		cancelWait()
		if err != nil {
			break // the window or the idle time is over, or ctx ended
		}
		if len(msg.Data) == 0 && msg.Header.Get("Status") == "503" {
			break // the server's "no responders": no orchestrator listens
		}
		var s sched.Snapshot
		if err := json.Unmarshal(msg.Data, &s); err != nil {
			return nil, fmt.Errorf("ops: scheduler stats: an answer is not a snapshot: %w", err)
		}
		snaps = append(snaps, s)
	}
	if len(snaps) == 0 {
		return nil, ErrNoOrchestrator
	}
	// One snapshot per instance (the latest): a second answer of one
	// orchestrator, or a forged one under its id, is not summed twice.
	slices.SortStableFunc(snaps, func(a, b sched.Snapshot) int {
		return cmp.Or(cmp.Compare(a.Instance, b.Instance), b.At.Compare(a.At))
	})
	snaps = slices.CompactFunc(snaps, func(a, b sched.Snapshot) bool { return a.Instance == b.Instance })
	return snaps, nil
}

// SchedStatus is the fleet's scheduler state: the sum of the
// orchestrators' snapshots, per tool and fairness key.
type SchedStatus struct {
	// Orchestrators are the instances whose snapshots are summed.
	Orchestrators []string `json:"orchestrators"`
	// Tools are the tools any of them holds calls of, sorted by name, as
	// sched.Merge sums them (Window and the calls summed, Keys summed per
	// tenant and key, busiest first, sched.OtherKey last), with Slots the
	// largest any orchestrator saw and Limits the sum of the
	// orchestrators' shares: the per-key limits the fleet applies.
	Tools []sched.ToolStats `json:"tools"`
}

// SumSchedStats sums snapshots (one per orchestrator) per tool and key.
func SumSchedStats(snaps []sched.Snapshot) SchedStatus {
	st := SchedStatus{Orchestrators: []string{}, Tools: sched.Merge(snaps).Tools}
	if st.Tools == nil {
		st.Tools = []sched.ToolStats{}
	}
	fleet := map[string]*sched.ToolStats{} // tool → its slots and limits over the orchestrators
	for _, s := range snaps {
		st.Orchestrators = append(st.Orchestrators, s.Instance)
		for _, ts := range s.Tools {
			f := fleet[ts.Tool]
			if f == nil {
				f = &sched.ToolStats{}
				fleet[ts.Tool] = f
			}
			f.Slots = max(f.Slots, ts.Slots)
			f.Limits = addLimits(f.Limits, ts.Limits)
		}
	}
	for i := range st.Tools {
		f := fleet[st.Tools[i].Tool]
		st.Tools[i].Slots, st.Tools[i].Limits = f.Slots, f.Limits
	}
	return st
}

// addLimits adds one orchestrator's share of the per-key limits to the
// sum so far: caps, rates (in the period of the first) and bursts add up.
func addLimits(sum, share sched.Limits) sched.Limits {
	sum.Concurrency += share.Concurrency
	if share.Rate > 0 && share.Per > 0 {
		if sum.Per == 0 {
			sum.Per = share.Per
		}
		sum.Rate += share.Rate * float64(sum.Per) / float64(share.Per)
		sum.Burst += share.Burst
	}
	return sum
}
