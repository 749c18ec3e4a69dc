package ops

import (
	"context"
	"time"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/pkg/tools"
)

// LiveTool is one live tool (one that at least one live worker announces):
// its definition in the Anthropic tools format and the workers serving it.
type LiveTool struct {
	tools.Definition
	Workers []LiveWorker `json:"workers"`
}

// LiveWorker is one live worker serving a tool, as it announces itself.
type LiveWorker struct {
	WorkerID    string    `json:"worker_id"`
	Timeout     string    `json:"timeout"`
	MaxAttempts int       `json:"max_attempts"`
	Concurrency int       `json:"concurrency,omitempty"`
	StartedAt   time.Time `json:"started_at"`
}

// LiveTools returns the live tools, sorted by name, each with its workers.
func LiveTools(ctx context.Context, live *discovery.Catalog) []LiveTool {
	defs := live.Definitions(ctx)
	list := make([]LiveTool, 0, len(defs))
	for _, def := range defs {
		lt := LiveTool{Definition: def, Workers: []LiveWorker{}}
		for _, a := range live.Workers(ctx, def.Name) {
			lt.Workers = append(lt.Workers, LiveWorker{
				WorkerID: a.WorkerID, Timeout: a.Timeout.String(), MaxAttempts: a.MaxAttempts,
				Concurrency: a.Concurrency, StartedAt: a.StartedAt,
			})
		}
		list = append(list, lt)
	}
	return list
}
