package sched

import (
	"cmp"
	"slices"
	"time"

	"github.com/toolpool/toolpool/internal/pooltype"
)

// The scheduler's snapshot types are shared words (package pooltype): the
// metrics, the console and `status --by-key` read them without importing
// the scheduler.
type (
	// Snapshot is one scheduler's state (pooltype.Snapshot).
	Snapshot = pooltype.Snapshot
	// ToolStats is one tool's part of a Snapshot (pooltype.ToolStats).
	ToolStats = pooltype.ToolStats
	// KeyStats is one fairness key's part of a ToolStats (pooltype.KeyStats).
	KeyStats = pooltype.KeyStats
)

// OtherKey is the key under which the keys beyond a snapshot's bound are
// summed (pooltype.OtherKey).
const OtherKey = pooltype.OtherKey

// Merge sums the snapshots of several replicas (pooltype.Merge).
func Merge(snaps []Snapshot) Snapshot { return pooltype.Merge(snaps) }

// Snapshot is the scheduler's state now, for instance (the orchestrator's
// id): the tools with calls waiting or in flight or served within
// IdleKeyTTL, each with at most Config.MaxKeys keys (the
// busiest: waiting plus in flight, then the recent rate), the rest summed
// under OtherKey.
func (s *Scheduler) Snapshot(instance string) Snapshot {
	replicas, _ := s.Replicas()
	snap := Snapshot{Instance: instance, At: s.cfg.Clock.Now(), Replicas: replicas}
	s.mu.RLock()
	ts := make([]*toolState, 0, len(s.tools))
	for _, t := range s.tools {
		ts = append(ts, t)
	}
	s.mu.RUnlock()
	slices.SortFunc(ts, func(a, b *toolState) int { return cmp.Compare(a.name, b.name) })
	for _, t := range ts {
		// A tool idle so long that its keys were forgotten is left out.
		if st := s.toolStats(t); st.InFlight+st.Waiting > 0 || len(st.Keys) > 0 {
			snap.Tools = append(snap.Tools, st)
		}
	}
	return snap
}

func (s *Scheduler) toolStats(t *toolState) ToolStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := s.nanotime()
	s.sweep(t, now)
	ts := ToolStats{
		Tool: t.name, Slots: t.slots, Window: t.window,
		InFlight: t.inFlight, Waiting: t.waiting, Limits: t.limits,
	}
	keys := make([]KeyStats, 0, len(t.keys))
	for _, k := range t.keys {
		ks := KeyStats{
			Key: k.id.key, Tenant: k.id.tenant, Weight: k.weight,
			InFlight: k.inFlight, Waiting: k.waiting,
			Served: k.served, PerSecond: k.perSecond(now),
		}
		if k.parked != parkedNot {
			ks.Limited = k.waiting
			ts.Limited += k.waiting
		}
		for l, n := range k.waitingLevel {
			if n > 0 {
				if ks.ByPriority == nil {
					ks.ByPriority = map[string]int{}
				}
				ks.ByPriority[levelNames[l]] = n
			}
		}
		keys = append(keys, ks)
	}
	slices.SortFunc(keys, func(a, b KeyStats) int {
		if c := cmp.Compare(b.Waiting+b.InFlight, a.Waiting+a.InFlight); c != 0 {
			return c
		}
		if c := cmp.Compare(b.PerSecond, a.PerSecond); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Key, b.Key))
	})
	if len(keys) > s.cfg.MaxKeys {
		other := KeyStats{Key: OtherKey, Tenant: OtherKey}
		for _, k := range keys[s.cfg.MaxKeys-1:] {
			other.Add(k)
		}
		keys = append(keys[:s.cfg.MaxKeys-1], other)
	}
	ts.Keys = keys
	return ts
}

// perSecond is the key's recent grant rate: the last whole second's
// count, fading out as the current second's comes in.
func (k *keyState) perSecond(now int64) float64 {
	d := now - k.secStart
	switch {
	case k.served == 0 || d >= 2*int64(time.Second):
		return 0
	case d >= int64(time.Second):
		return float64(k.cur) * float64(2*int64(time.Second)-d) / float64(time.Second)
	}
	f := float64(d) / float64(time.Second)
	return float64(k.prev1)*(1-f) + float64(k.cur)
}
