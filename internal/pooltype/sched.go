package pooltype

import (
	"cmp"
	"slices"
	"time"
)

// OtherKey is the KeyStats.Key (and the metrics' tenant label) under which
// the keys beyond a snapshot's bound are summed.
const OtherKey = "other"

// Snapshot is one scheduler's state: one orchestrator replica's view of
// the fair shares, limits and priorities of the calls it dispatches. It
// is what an orchestrator answers on jetstream.SchedStatsSubject (JSON),
// what `orchestrator status --by-key` sums over the replicas, and what the
// metrics export.
type Snapshot struct {
	// Instance is the orchestrator's instance id.
	Instance string `json:"instance"`
	// At is when the snapshot was taken.
	At time.Time `json:"at"`
	// Replicas is how many orchestrators this one counts as sharing the
	// fleet-wide per-key limits (itself included).
	Replicas int `json:"replicas"`
	// Tools are the tools with calls waiting or in flight, or served
	// recently, sorted by name.
	Tools []ToolStats `json:"tools"`
}

// ToolStats is one tool in a Snapshot.
type ToolStats struct {
	Tool string `json:"tool"`
	// Slots is the fleet's slots for the tool as last looked up
	// (dispatch.ToolInfo.Slots); Window is how many calls this scheduler
	// lets be in flight at once (0: no window).
	Slots  int `json:"slots"`
	Window int `json:"window"`
	// InFlight are calls published and not yet answered (queued in
	// JetStream or running); Waiting are calls held by the scheduler for
	// their turn; Limited are calls held because their key is at its
	// concurrency cap or out of rate.
	InFlight int `json:"in_flight"`
	Waiting  int `json:"waiting"`
	Limited  int `json:"limited"`
	// Limits are the tool's per-key limits, as this scheduler applies
	// them (its share when Replicas > 1).
	Limits Limits `json:"limits"`
	// Keys are the tool's fairness keys with calls waiting or in flight,
	// or served recently: at most a bound of them (busiest first), the
	// rest summed under OtherKey.
	Keys []KeyStats `json:"keys"`
}

// KeyStats is one fairness key of a tool in a Snapshot.
type KeyStats struct {
	// Key is the fairness key (OtherKey for the sum of the rest); Tenant
	// is the tenant it belongs to.
	Key    string `json:"key"`
	Tenant string `json:"tenant"`
	Weight int    `json:"weight"`
	// InFlight, Waiting and Limited are as in ToolStats, for this key.
	InFlight int `json:"in_flight"`
	Waiting  int `json:"waiting"`
	Limited  int `json:"limited"`
	// Served counts the key's calls published since the scheduler
	// started; PerSecond is its recent rate.
	Served    uint64  `json:"served"`
	PerSecond float64 `json:"per_second"`
	// ByPriority counts the key's waiting calls by priority name ("high",
	// "normal", "low"), only those with any.
	ByPriority map[string]int `json:"by_priority,omitempty"`
}

// Limits are the per-key limits a scheduler applies to a tool.
type Limits struct {
	// Concurrency caps a key's calls in flight; 0: no cap.
	Concurrency int `json:"concurrency,omitempty"`
	// Rate calls per Per, with Burst at once; Rate 0: no rate limit.
	Rate  float64       `json:"rate,omitempty"`
	Per   time.Duration `json:"per_ns,omitempty"`
	Burst int           `json:"burst,omitempty"`
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

// keyID names a key of a tool in Merge.
type keyID struct{ tenant, key string }
