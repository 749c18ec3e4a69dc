package console

import (
	"context"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/backlog"

	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/infra/metrics"
)

// toolRow is one tool on the overview.
type toolRow struct {
	Tool        string
	Consumer    bool
	Queued      uint64
	Running     int
	Redelivered int
	Waiting     int // held by the scheduler for the tool's window
	Limited     int // waiting on a per-key limit
	HasSched    bool
	PerSecond   float64
	OK          int
	Errors      []classCount
	P50, P99    time.Duration
	DeadLetters uint64
	PausedUntil *time.Time
	Workers     []workerRow
	Slots       int
	Cache       *metrics.CacheToolCounts // this orchestrator's cache outcomes; nil: none
	Backlog     *backlog.ToolBacklog     // its backlog judged; nil: not known (no monitor)
}

// classCount is the results of one error class.
type classCount struct {
	Class string
	N     int
}

// workerRow is one live worker of a tool, through an allow-list of its
// announcement's fields.
type workerRow struct {
	ID          string
	Version     string
	StartedAt   time.Time
	Slots       int
	Concurrency int
	Timeout     time.Duration
	MaxAttempts int
}

// overview is the state the overview page shows.
type overview struct {
	At       time.Time
	Tools    []toolRow
	Err      string // reading the state failed
	Health   health.Report
	Watching time.Time // results watched since (zero: just started)
	Letters  uint64
	Workers  int
	Caching  bool // the cache column is shown: some tool has cache outcomes
	Budgets  []budgetRow
	// BudgetErr is why the budgets could not be read.
	BudgetErr string
	// HasBacklog says the backlog columns are shown (Config.Backlog).
	HasBacklog bool
	// Alarms are the tools whose backlog is not ok, stalled first.
	Alarms []backlog.ToolBacklog
	// BacklogErr is why the backlog could not be read.
	BacklogErr string
}

// HealthClass is the pool badge's colour: good when the pool is ready
// and no tool's backlog is backing up or stalled, warn when one is
// backing up, bad when the pool is not ready or a tool is stalled.
func (ov *overview) HealthClass() string {
	switch {
	case !ov.Health.Ready():
		return "bad"
	case len(ov.Alarms) == 0:
		return "good"
	case ov.Alarms[0].State == backlog.StateStalled:
		return "bad"
	}
	return "warn"
}

// addBacklog sets each tool's backlog and the alarms.
func (c *Console) addBacklog(ctx context.Context, ov *overview, byTool map[string]*toolRow) {
	ov.HasBacklog = c.cfg.Backlog != nil
	bl, err := c.backlogOf(ctx)
	if err != nil {
		ov.BacklogErr = "The backlog cannot be read: " + err.Error()
	}
	for tool, b := range bl {
		r := byTool[tool]
		if r == nil {
			r = &toolRow{Tool: tool}
			byTool[tool] = r
		}
		r.Backlog = &b
		if b.State != backlog.StateOK && b.State != "" {
			ov.Alarms = append(ov.Alarms, b)
		}
	}
	slices.SortFunc(ov.Alarms, func(a, b backlog.ToolBacklog) int {
		if a.State != b.State {
			if a.State == backlog.StateStalled {
				return -1
			}
			if b.State == backlog.StateStalled {
				return 1
			}
		}
		return strings.Compare(a.Tool, b.Tool)
	})
}

// overviewCache reads the state at most once per Refresh, whoever asks.
type overviewCache struct {
	c *Console

	mu       sync.Mutex
	at       time.Time
	cur      *overview
	healthAt time.Time
	health   health.Report
}

func newOverviewCache(c *Console) *overviewCache { return &overviewCache{c: c} }

// overviewReadTimeout bounds one read of the overview's state.
const overviewReadTimeout = 5 * time.Second

// get returns the state, read again when older than Refresh.
func (oc *overviewCache) get(ctx context.Context) *overview {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	now := time.Now()
	if oc.cur != nil && now.Sub(oc.at) < oc.c.cfg.Refresh {
		return oc.cur
	}
	// Read for every viewer: not ended by this one's request going away,
	// which would cache its "context canceled" for the others.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), overviewReadTimeout)
	defer cancel()
	if now.Sub(oc.healthAt) >= oc.c.cfg.HealthEvery || oc.healthAt.IsZero() {
		oc.health = health.New(2*time.Second, oc.c.cfg.Checks...).Check(ctx)
		oc.healthAt = now
	}
	oc.cur = oc.c.readOverview(ctx, now)
	oc.cur.Health = oc.health
	oc.at = now
	return oc.cur
}

// workerSource is the live catalog as ops.Status takes it, or none.
func (c *Console) workerSource() ops.WorkerSource {
	if c.cfg.Live == nil {
		return nil
	}
	return c.cfg.Live
}

func workerRows(anns []discovery.Announcement) []workerRow {
	out := make([]workerRow, 0, len(anns))
	for _, a := range anns {
		out = append(out, workerRow{ID: a.WorkerID, Version: a.Version, StartedAt: a.StartedAt, Slots: a.Slots,
			Concurrency: a.Concurrency, Timeout: a.Timeout, MaxAttempts: a.MaxAttempts})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// readOverview reads the state: ops.Status (consumers, dead letters, live
// workers), the watched results and the scheduler's snapshot.
func (c *Console) readOverview(ctx context.Context, now time.Time) *overview {
	ov := &overview{At: now}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sts, err := ops.Status(ctx, c.cfg.JetStream, c.workerSource())
	if err != nil {
		ov.Err = err.Error()
	}
	rates, since := c.watch.rates(now)
	ov.Watching = since
	byTool := map[string]*toolRow{}
	for _, s := range sts {
		r := &toolRow{Tool: s.Tool, Consumer: s.Consumer, Queued: s.Pending, Running: s.InFlight,
			Redelivered: s.Redelivered, DeadLetters: s.DeadLetters}
		if s.Paused(now) {
			r.PausedUntil = s.PausedUntil
		}
		if c.cfg.Live != nil {
			r.Workers = workerRows(c.cfg.Live.Workers(ctx, s.Tool))
			for _, w := range r.Workers {
				r.Slots += w.Slots
			}
		}
		ov.Letters += s.DeadLetters
		byTool[s.Tool] = r
	}
	for tool, rt := range rates {
		r := byTool[tool]
		if r == nil {
			r = &toolRow{Tool: tool}
			byTool[tool] = r
		}
		r.PerSecond, r.P50, r.P99 = rt.PerSecond, rt.P50, rt.P99
		for _, class := range slices.Sorted(maps.Keys(rt.ByClass)) {
			if class == "ok" {
				r.OK = rt.ByClass[class]
				continue
			}
			r.Errors = append(r.Errors, classCount{class, rt.ByClass[class]})
		}
	}
	ov.Caching = c.addCacheCounts(byTool)
	c.addBacklog(ctx, ov, byTool)
	ov.Budgets, ov.BudgetErr = c.readBudgets(ctx)
	if c.cfg.Snapshot != nil {
		for _, ts := range c.cfg.Snapshot().Tools {
			if r := byTool[ts.Tool]; r != nil {
				r.Waiting, r.Limited, r.HasSched = ts.Waiting, ts.Limited, true
			}
		}
	}
	workers := map[string]bool{}
	for _, tool := range slices.Sorted(maps.Keys(byTool)) {
		r := byTool[tool]
		for _, w := range r.Workers {
			workers[w.ID] = true
		}
		ov.Tools = append(ov.Tools, *r)
	}
	ov.Workers = len(workers)
	return ov
}

// tool returns one tool's row of the overview, and whether it has one.
func (ov *overview) tool(name string) (toolRow, bool) {
	for _, r := range ov.Tools {
		if r.Tool == name {
			return r, true
		}
	}
	return toolRow{}, false
}

// invalidate makes the next get read the state again (after a pause).
func (oc *overviewCache) invalidate() {
	oc.mu.Lock()
	oc.cur = nil
	oc.mu.Unlock()
}
