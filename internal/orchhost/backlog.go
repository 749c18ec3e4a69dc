package orchhost

import (
	"context"

	"github.com/toolpool/toolpool/internal/fleet/backlog"
	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// newBacklog makes the backlog monitor (after the dispatcher: it reads
// the live catalog and the schedulers) and registers its metrics.
func (h *Host) newBacklog() (err error) {
	bc := h.cfg.Backlog
	bc.JetStream, bc.Logger = h.js, h.cfg.Logger
	bc.Instance, bc.Snapshot = h.d.Instance(), h.fleetSchedSnapshot
	if h.live != nil {
		bc.Live = h.live
	}
	if h.backlog, err = backlog.New(bc); err != nil {
		return err
	}
	states := make([]string, len(backlog.States))
	for i, s := range backlog.States {
		states[i] = string(s)
	}
	return h.cfg.Metrics.Register(metrics.NewBacklogCollector(h.backlogTools,
		metrics.BacklogOptions{States: states, Logger: h.cfg.Logger}))
}

// observeResult counts a result that reached a caller in the history
// (dispatch.Config.OnResult).
func (h *Host) observeResult(tool string, res *envelope.Result) {
	h.backlog.ObserveResult(tool, string(res.Class), res.ExecTime)
}

// backlogTools is the backlog as the metrics export it.
func (h *Host) backlogTools(ctx context.Context) ([]metrics.BacklogTool, error) {
	tools, err := h.backlog.Backlog(ctx)
	out := make([]metrics.BacklogTool, len(tools))
	for i, t := range tools {
		out[i] = metrics.BacklogTool{Tool: t.Tool, State: string(t.State), OldestAge: t.OldestAge,
			Draining: t.Draining, Drain: t.Drain}
	}
	return out, err
}

// Backlog is the Host's backlog monitor: each tool's backlog now, and the
// fleet's history (package backlog).
func (h *Host) Backlog() *backlog.Monitor { return h.backlog }
