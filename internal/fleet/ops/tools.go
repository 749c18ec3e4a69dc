package ops

import (
	"context"
	"time"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/pkg/tools"
)

// LiveTool is one live tool (one that at least one live worker announces):
// its definition in the Anthropic tools format, what the orchestrators
// apply before its calls run (cost, cache, approval rule: those of its
// newest worker, as discovery.Catalog.Lookup answers them, with its
// version) and the workers serving it.
type LiveTool struct {
	tools.Definition
	Cost     int                 `json:"cost,omitempty"`
	Cache    *tools.CachePolicy  `json:"cache,omitempty"`
	Approval *tools.ApprovalRule `json:"approval,omitempty"`
	Version  string              `json:"version,omitempty"`
	Workers  []LiveWorker        `json:"workers"`
}

// LiveWorker is one live worker serving a tool, as it announces itself.
type LiveWorker struct {
	WorkerID    string    `json:"worker_id"`
	Timeout     string    `json:"timeout"`
	MaxAttempts int       `json:"max_attempts"`
	Concurrency int       `json:"concurrency,omitempty"`
	Slots       int       `json:"slots,omitempty"`
	StartedAt   time.Time `json:"started_at"`
}

// LiveTools returns the live tools, sorted by name, each with its workers.
func LiveTools(ctx context.Context, live *discovery.Catalog) []LiveTool {
	defs := live.Definitions(ctx)
	list := make([]LiveTool, 0, len(defs))
	for _, def := range defs {
		lt := LiveTool{Definition: def, Workers: []LiveWorker{}}
		if info, ok := live.Lookup(ctx, def.Name); ok {
			lt.Cost, lt.Cache, lt.Approval, lt.Version = info.Cost, info.Cache, info.Approval, info.Version
		}
		for _, a := range live.Workers(ctx, def.Name) {
			lt.Workers = append(lt.Workers, LiveWorker{
				WorkerID: a.WorkerID, Timeout: a.Timeout.String(), MaxAttempts: a.MaxAttempts,
				Concurrency: a.Concurrency, Slots: a.Slots, StartedAt: a.StartedAt,
			})
		}
		list = append(list, lt)
	}
	return list
}
