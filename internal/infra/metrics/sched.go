package metrics

import (
	"sync"

	"github.com/toolpool/toolpool/internal/pooltype"

	"github.com/prometheus/client_golang/prometheus"
)

// SchedOptions configures a SchedCollector.
type SchedOptions struct {
	// Tenants are the tenants labelled by name: the API keys' tenants
	// (apikey.Set.Tenants). The calls of every other tenant are summed
	// under the tenant label pooltype.OtherKey. The tenant "" (a pool without
	// API keys) is always labelled by name.
	Tenants []string
	// MaxTools caps the distinct tool label values; further tools are
	// labelled UnknownTool. Default MaxToolsDefault.
	MaxTools int
}

// SchedCollector exports an orchestrator's scheduler (package sched),
// read at scrape time from a func returning its pooltype.Snapshot: per tool
// and tenant the calls waiting (for their turn or on a per-key limit), of
// those the ones limited, and the calls in flight, and a counter of the calls granted (served); per tool the
// fleet's slots, the scheduler's window and the per-key limits it
// applies. Labels stay bounded: tools by name up to MaxTools, tenants by
// name only for the configured ones (SchedOptions.Tenants), all others
// summed as pooltype.OtherKey; fairness keys finer than the tenant (sessions,
// input values) are summed into their tenant.
type SchedCollector struct {
	snapshot func() pooltype.Snapshot
	tenants  map[string]bool
	tools    *toolLabels

	replicas, waiting, limited, inFlight, served, slots, window, keyConc, keyRate, keyBurst *prometheus.Desc

	mu     sync.Mutex
	last   map[schedKey]uint64    // tool and fairness key → served, at the last scrape
	totals map[schedLabel]float64 // tool and tenant label → served since the collector started
}

// schedKey is one fairness key of one tool in a snapshot.
type schedKey struct{ tool, key string }

// schedLabel is one tool and tenant label pair.
type schedLabel struct{ tool, tenant string }

var _ prometheus.Collector = (*SchedCollector)(nil)

// NewSchedCollector returns a collector of snapshot, called once per
// scrape. Register it with a prometheus.Registry.
func NewSchedCollector(snapshot func() pooltype.Snapshot, opts SchedOptions) *SchedCollector {
	c := &SchedCollector{
		snapshot: snapshot,
		tenants:  map[string]bool{"": true},
		tools:    newToolLabels(nil, nil, opts.MaxTools, nil),
		last:     map[schedKey]uint64{},
		totals:   map[schedLabel]float64{},
	}
	for _, t := range opts.Tenants {
		c.tenants[t] = true
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(Namespace+"_sched_"+name, help, labels, nil)
	}
	c.replicas = desc("replicas",
		"Orchestrators this one counts as sharing the fleet-wide per-key limits, itself included.")
	c.waiting = desc("waiting_calls",
		"Calls held by this orchestrator's scheduler (the tool's window is full, or their key is at a per-key limit), by tool and tenant.", "tool", "tenant")
	c.limited = desc("limited_calls",
		"Of the calls held, those whose fairness key is at its concurrency cap or out of rate (per_key), by tool and tenant.", "tool", "tenant")
	c.inFlight = desc("in_flight_calls",
		"Calls this orchestrator published and that are not yet answered (queued in JetStream or running), by tool and tenant.", "tool", "tenant")
	c.served = desc("served_calls_total",
		"Calls this orchestrator's scheduler let through to JetStream, by tool and tenant.", "tool", "tenant")
	c.slots = desc("slots",
		"The fleet's slots for the tool: the lesser of its concurrency and its live workers' slots; 0: not known.", "tool")
	c.window = desc("window_calls",
		"How many of the tool's calls this orchestrator lets be in flight at once; 0: no window.", "tool")
	c.keyConc = desc("key_concurrency_limit",
		"The per-key concurrency cap this orchestrator applies to the tool (its share of per_key.concurrency); absent: no cap.", "tool")
	c.keyRate = desc("key_rate_limit_per_second",
		"The per-key rate this orchestrator applies to the tool, in calls per second (its share of per_key.rate per per_key.per); absent: no rate limit.", "tool")
	c.keyBurst = desc("key_rate_burst",
		"The burst of the tool's per-key rate limit, as this orchestrator applies it.", "tool")
	return c
}

// Describe sends the descriptors of the metrics.
func (c *SchedCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.replicas, c.waiting, c.limited, c.inFlight, c.served, c.slots, c.window, c.keyConc, c.keyRate, c.keyBurst,
	} {
		ch <- d
	}
}

// known reports whether tenant is labelled by name.
func (c *SchedCollector) known(tenant string) bool { return c.tenants[tenant] }

// tenantLabel is the label of tenant: its name when configured, else
// pooltype.OtherKey.
func (c *SchedCollector) tenantLabel(tenant string) string {
	if c.known(tenant) {
		return tenant
	}
	return pooltype.OtherKey
}

// Collect reads a snapshot and sends the metrics.
func (c *SchedCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.snapshot()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.replicas, float64(max(snap.Replicas, 1)))

	byLabel := map[schedLabel]*pooltype.KeyStats{}
	c.mu.Lock()
	defer c.mu.Unlock()
	last := make(map[schedKey]uint64, len(c.last))
	toolDone := map[string]bool{}
	for _, t := range snap.Tools {
		tool := c.tools.label(t.Tool)
		c.collectKeys(t, tool, byLabel, last)
		if toolDone[tool] {
			continue // one of the tools past MaxTools: the first one's settings stand for them
		}
		toolDone[tool] = true
		gauge(c.slots, float64(t.Slots), tool)
		gauge(c.window, float64(t.Window), tool)
		if t.Limits.Concurrency > 0 {
			gauge(c.keyConc, float64(t.Limits.Concurrency), tool)
		}
		if t.Limits.Rate > 0 && t.Limits.Per > 0 {
			gauge(c.keyRate, t.Limits.Rate/t.Limits.Per.Seconds(), tool)
			gauge(c.keyBurst, float64(t.Limits.Burst), tool)
		}
	}
	c.last = last
	for l, n := range byLabel {
		gauge(c.waiting, float64(n.Waiting), l.tool, l.tenant)
		gauge(c.limited, float64(n.Limited), l.tool, l.tenant)
		gauge(c.inFlight, float64(n.InFlight), l.tool, l.tenant)
	}
	for l, v := range c.totals {
		ch <- prometheus.MustNewConstMetric(c.served, prometheus.CounterValue, v, l.tool, l.tenant)
	}
}

// collectKeys adds the keys of t (labelled tool) to gauges, summed by
// tenant label (pooltype.ToolStats.ByTenant), and their served calls to the
// counters, recording each key's served count in last; c.mu is held.
func (c *SchedCollector) collectKeys(t pooltype.ToolStats, tool string, gauges map[schedLabel]*pooltype.KeyStats, last map[schedKey]uint64) {
	for _, r := range t.ByTenant(c.known) {
		l := schedLabel{tool, r.Tenant}
		if g := gauges[l]; g != nil {
			g.Add(r) // another tool past MaxTools
			continue
		}
		gauges[l] = &r
		c.totals[l] += 0 // the counter exists from the tenant's first calls
	}
	// The served counter grows by what each key served since the last
	// scrape; a key the scheduler forgot (idle) and took up again counts
	// from zero.
	for _, k := range t.Keys {
		l := schedLabel{tool, c.tenantLabel(k.Tenant)}
		if k.Key == pooltype.OtherKey {
			l.tenant = pooltype.OtherKey
		}
		sk := schedKey{t.Tool, k.Key}
		if prev, seen := c.last[sk]; seen && k.Served >= prev {
			c.totals[l] += float64(k.Served - prev)
		} else {
			c.totals[l] += float64(k.Served)
		}
		last[sk] = k.Served
	}
}
