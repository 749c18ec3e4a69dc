package metrics

import (
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/internal/worker/mcpback"
)

// The Prometheus types implement the sides' metrics hooks. The assertions
// live in a test so that this package imports no side.
var (
	_ dispatch.Metrics       = (*Dispatch)(nil)
	_ dispatch.RejectMetrics = (*Dispatch)(nil)
	_ dispatch.CancelMetrics = (*Dispatch)(nil)
	_ worker.Metrics         = (*Worker)(nil)
	_ worker.QueueMetrics    = (*Worker)(nil)
	_ mcpback.Metrics        = (*MCP)(nil)
)
