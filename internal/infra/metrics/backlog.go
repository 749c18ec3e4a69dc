package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BacklogTool is one tool's backlog as the BacklogCollector exports it
// (the fleet side's backlog.ToolBacklog, adapted by the orchestrator).
type BacklogTool struct {
	Tool string
	// State is the backlog judged: one of BacklogOptions.States.
	State string
	// OldestAge is the age of the oldest queued call (0: none queued).
	OldestAge time.Duration
	// Draining says the backlog shrinks (or is empty); Drain is then the
	// estimated time until nothing is queued.
	Draining bool
	Drain    time.Duration
}

// BacklogOptions configures a BacklogCollector.
type BacklogOptions struct {
	// States are every state's name: each tool exports one series per
	// state, 1 for its current one and 0 for the others.
	States []string
	// Timeout bounds one read. Default JetStreamTimeoutDefault.
	Timeout time.Duration
	// MaxTools caps the tools exported; further tools are left out.
	// Default MaxToolsDefault.
	MaxTools int
	// Logger receives a failed read, at debug level. Default
	// slog.Default().
	Logger *slog.Logger
}

// BacklogCollector exports the backlog of every tool, read at scrape time:
// toolpool_backlog_oldest_age_seconds, toolpool_backlog_drain_estimate_seconds
// (-1 while the backlog is not draining: growing, or too young a history
// to tell; 0 when nothing is queued) and toolpool_backlog_state (1 for the
// tool's state, 0 for the others).
type BacklogCollector struct {
	read func(ctx context.Context) ([]BacklogTool, error)
	opts BacklogOptions

	age, drain, state *prometheus.Desc
}

var _ prometheus.Collector = (*BacklogCollector)(nil)

// NewBacklogCollector returns a collector of read, called once per scrape.
// Register it with a prometheus.Registry.
func NewBacklogCollector(read func(ctx context.Context) ([]BacklogTool, error), opts BacklogOptions) *BacklogCollector {
	if opts.Timeout <= 0 {
		opts.Timeout = JetStreamTimeoutDefault
	}
	if opts.MaxTools <= 0 {
		opts.MaxTools = MaxToolsDefault
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(Namespace+"_backlog_"+name, help, labels, nil)
	}
	return &BacklogCollector{read: read, opts: opts,
		age: desc("oldest_age_seconds",
			"Age of the tool's oldest queued call (in TOOL_CALLS, not yet delivered to a worker); 0 when none is queued.", "tool"),
		drain: desc("drain_estimate_seconds",
			"Estimated time until nothing of the tool is queued, at the rate its backlog shrank over the last minute; 0 when nothing is queued, -1 when it is not draining.", "tool"),
		state: desc("state",
			"The tool's backlog state: 1 for the current one (ok, backing_up: the oldest queued call is older than the threshold, stalled: calls queued and nothing takes them), 0 for the others.", "tool", "state"),
	}
}

// Describe sends the descriptors.
func (c *BacklogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.age
	ch <- c.drain
	ch <- c.state
}

// Collect reads the backlog and sends its metrics; a failed read sends
// what was read, or nothing.
func (c *BacklogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	tools, err := c.read(ctx)
	if err != nil {
		c.opts.Logger.Debug("metrics: reading the backlog failed", "err", err)
	}
	for i, t := range tools {
		if i >= c.opts.MaxTools {
			break
		}
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, t.OldestAge.Seconds(), t.Tool)
		drain := -1.0
		if t.Draining {
			drain = t.Drain.Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.drain, prometheus.GaugeValue, drain, t.Tool)
		for _, s := range c.opts.States {
			v := 0.0
			if s == t.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, t.Tool, s)
		}
	}
}
