package sched

import (
	"cmp"
	"slices"
	"time"
)

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

// Add adds o's counts (in flight, waiting, limited, served, rate, waiting
// by priority) to k's: summing keys under OtherKey, or one key over
// several replicas' snapshots. Key, Tenant and Weight stay k's.
func (k *KeyStats) Add(o KeyStats) {
	k.InFlight += o.InFlight
	k.Waiting += o.Waiting
	k.Limited += o.Limited
	k.Served += o.Served
	k.PerSecond += o.PerSecond
	for p, n := range o.ByPriority {
		if k.ByPriority == nil {
			k.ByPriority = map[string]int{}
		}
		k.ByPriority[p] += n
	}
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

// ByTenant sums the tool's keys by tenant, for metrics of bounded
// cardinality: the tenants known says are kept (sorted), every other
// tenant and the keys already summed under OtherKey go to one OtherKey
// row (last, when there is any). Key is the tenant in the rows; Weight
// the largest of the tenant's keys.
func (ts ToolStats) ByTenant(known func(tenant string) bool) []KeyStats {
	rows := map[string]*KeyStats{}
	for _, k := range ts.Keys {
		name := k.Tenant
		if k.Key == OtherKey || !known(name) {
			name = OtherKey
		}
		r := rows[name]
		if r == nil {
			r = &KeyStats{Key: name, Tenant: name}
			rows[name] = r
		}
		r.Weight = max(r.Weight, k.Weight)
		r.Add(k)
	}
	out := make([]KeyStats, 0, len(rows))
	for name, r := range rows {
		if name != OtherKey {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b KeyStats) int { return cmp.Compare(a.Tenant, b.Tenant) })
	if r := rows[OtherKey]; r != nil {
		out = append(out, *r)
	}
	return out
}

// Merge sums the snapshots of several replicas (as `orchestrator status
// --by-key` shows them): per tool the calls in flight, waiting and
// limited, the slots and limits as the first replica saw them and the
// window summed; per tool and key (tenant and key) the keys' counts
// summed, busiest first (OtherKey last). The result's Instance is empty and Replicas the
// number of snapshots.
func Merge(snaps []Snapshot) Snapshot {
	out := Snapshot{Replicas: len(snaps)}
	tools := map[string]*ToolStats{}
	keys := map[string]map[keyID]*KeyStats{}
	for _, s := range snaps {
		if s.At.After(out.At) {
			out.At = s.At
		}
		for _, t := range s.Tools {
			m := tools[t.Tool]
			if m == nil {
				m = &ToolStats{Tool: t.Tool, Slots: t.Slots, Limits: t.Limits}
				tools[t.Tool] = m
				keys[t.Tool] = map[keyID]*KeyStats{}
			}
			m.Window += t.Window
			m.InFlight += t.InFlight
			m.Waiting += t.Waiting
			m.Limited += t.Limited
			for _, k := range t.Keys {
				id := keyID{k.Tenant, k.Key}
				r := keys[t.Tool][id]
				if r == nil {
					r = &KeyStats{Key: k.Key, Tenant: k.Tenant, Weight: k.Weight}
					keys[t.Tool][id] = r
				}
				r.Add(k)
			}
		}
	}
	for name, m := range tools {
		for _, k := range keys[name] {
			m.Keys = append(m.Keys, *k)
		}
		slices.SortFunc(m.Keys, func(a, b KeyStats) int {
			if ao, bo := a.Key == OtherKey, b.Key == OtherKey; ao != bo {
				if ao {
					return 1
				}
				return -1
			}
			if c := cmp.Compare(b.Waiting+b.InFlight, a.Waiting+a.InFlight); c != 0 {
				return c
			}
			return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Key, b.Key))
		})
		out.Tools = append(out.Tools, *m)
	}
	slices.SortFunc(out.Tools, func(a, b ToolStats) int { return cmp.Compare(a.Tool, b.Tool) })
	return out
}
