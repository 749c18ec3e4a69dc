package opscmd

import (
	"context"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/backlog"
	"github.com/toolpool/toolpool/internal/fleet/ops"
)

// statusRow is one tool of `orchestrator status`: its ops.ToolStatus and
// its backlog (the JSON adds the backlog's fields to ops.ToolStatus's).
type statusRow struct {
	ops.ToolStatus
	// OldestAgeSeconds is the age of the oldest queued call, in seconds.
	OldestAgeSeconds float64 `json:"oldest_age_s"`
	// Backlog is the backlog's state (ok, backing_up, stalled; empty when
	// it could not be read) and BacklogReason why it is not ok.
	Backlog       string `json:"backlog,omitempty"`
	BacklogReason string `json:"backlog_reason,omitempty"`
}

// withBacklog reads the tools' backlog once (a reading of its own: the
// state from the workers, the pause and the oldest call's age against
// age; a stall of a queue nothing takes needs the orchestrator's watch
// over time, shown on its console and metrics) and joins it to st.
func withBacklog(ctx context.Context, live *livePool, st []ops.ToolStatus, age time.Duration) []statusRow {
	rows := make([]statusRow, len(st))
	for i, s := range st {
		rows[i].ToolStatus = s
	}
	m, err := backlog.New(backlog.Config{JetStream: live.js, Live: live.catalog, BacklogAge: age, NoHistory: true})
	if err != nil {
		return rows
	}
	tools, _ := m.Backlog(ctx)
	byTool := make(map[string]backlog.ToolBacklog, len(tools))
	for _, b := range tools {
		byTool[b.Tool] = b
	}
	for i := range rows {
		if b, ok := byTool[rows[i].Tool]; ok {
			rows[i].OldestAgeSeconds = b.OldestAge.Seconds()
			rows[i].Backlog, rows[i].BacklogReason = string(b.State), b.Reason
		}
	}
	return rows
}
