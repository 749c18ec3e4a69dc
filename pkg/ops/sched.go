package ops

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/sched"
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
	slices.SortFunc(snaps, func(a, b sched.Snapshot) int { return cmp.Compare(a.Instance, b.Instance) })
	return snaps, nil
}

// SchedStatus is the fleet's scheduler state: the sum of the
// orchestrators' snapshots, per tool and fairness key.
type SchedStatus struct {
	// Orchestrators are the instances whose snapshots are summed.
	Orchestrators []string `json:"orchestrators"`
	// Tools are the tools any of them holds calls of, sorted by name:
	// Slots the largest any orchestrator saw, Window and the calls summed,
	// Limits the sum of the orchestrators' shares (the fleet's per-key
	// limits), Keys summed per key, busiest first (waiting, limited and
	// in flight), sched.OtherKey last.
	Tools []sched.ToolStats `json:"tools"`
}

// SumSchedStats sums snapshots (one per orchestrator) per tool and key.
func SumSchedStats(snaps []sched.Snapshot) SchedStatus {
	st := SchedStatus{Orchestrators: []string{}, Tools: []sched.ToolStats{}}
	tools := map[string]*sched.ToolStats{}
	keys := map[string]map[string]*sched.KeyStats{} // tool → key → sum
	for _, s := range snaps {
		st.Orchestrators = append(st.Orchestrators, s.Instance)
		for _, ts := range s.Tools {
			t := tools[ts.Tool]
			if t == nil {
				t = &sched.ToolStats{Tool: ts.Tool}
				tools[ts.Tool] = t
				keys[ts.Tool] = map[string]*sched.KeyStats{}
			}
			t.Slots = max(t.Slots, ts.Slots)
			t.Window += ts.Window
			t.InFlight += ts.InFlight
			t.Waiting += ts.Waiting
			t.Limited += ts.Limited
			t.Limits = addLimits(t.Limits, ts.Limits)
			for _, ks := range ts.Keys {
				k := keys[ts.Tool][ks.Key]
				if k == nil {
					k = &sched.KeyStats{Key: ks.Key, Tenant: ks.Tenant}
					keys[ts.Tool][ks.Key] = k
				}
				k.Weight = max(k.Weight, ks.Weight)
				k.Add(ks)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(tools)) {
		t := tools[name]
		t.Keys = make([]sched.KeyStats, 0, len(keys[name]))
		for _, k := range keys[name] {
			t.Keys = append(t.Keys, *k)
		}
		slices.SortFunc(t.Keys, compareKeys)
		st.Tools = append(st.Tools, *t)
	}
	return st
}

// compareKeys orders keys busiest first, sched.OtherKey last, then by
// name.
func compareKeys(a, b sched.KeyStats) int {
	if (a.Key == sched.OtherKey) != (b.Key == sched.OtherKey) {
		if a.Key == sched.OtherKey {
			return 1
		}
		return -1
	}
	if c := cmp.Compare(b.Waiting+b.Limited+b.InFlight, a.Waiting+a.Limited+a.InFlight); c != 0 {
		return c
	}
	if c := cmp.Compare(b.PerSecond, a.PerSecond); c != 0 {
		return c
	}
	return cmp.Compare(a.Key, b.Key)
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
