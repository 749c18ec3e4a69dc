package toolpool

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/pkg/tools"
)

// LiveTool is a tool that at least one live worker announces: its
// definition in the Anthropic tools format, its cost, cache and approval
// rule, and the workers serving it.
type LiveTool struct {
	tools.Definition
	// Cost, Cache and Approval are what the orchestrators apply before
	// the tool's calls run (Tool's fields), as its most recently started
	// worker announces them; zero when it has none.
	Cost     int           `json:"cost,omitempty"`
	Cache    *CachePolicy  `json:"cache,omitempty"`
	Approval *ApprovalRule `json:"approval,omitempty"`
	// Version is a short digest of that worker's build and of the tool's
	// definition: a cached result is shared only within one version.
	Version string `json:"version,omitempty"`
	// Workers are the live workers serving the tool.
	Workers []LiveWorker `json:"workers"`
}

// LiveWorker is one live worker serving a tool, as it announces itself.
type LiveWorker struct {
	// WorkerID is the worker's id (ServerConfig.WorkerID).
	WorkerID string `json:"worker_id"`
	// Timeout is the tool's timeout on this worker, as a duration.
	Timeout string `json:"timeout"`
	// MaxAttempts is the tool's attempts on this worker.
	MaxAttempts int `json:"max_attempts"`
	// Concurrency is the tool's fleet-wide cap of calls at once (Tool's
	// Concurrency, default 1000), as this worker announces it: a cap on
	// all the workers of the tool together, not this worker's.
	Concurrency int `json:"concurrency,omitempty"`
	// Slots is how many calls this worker runs at once over all its tools
	// (ServerConfig.Concurrency, `worker --concurrency`, default 256): the
	// number its "worker started" log line and the console show. 0 from
	// workers that do not announce it.
	Slots int `json:"slots,omitempty"`
	// StartedAt is when the worker started announcing.
	StartedAt time.Time `json:"started_at"`
}

// LiveTools reads the live tools of the pool nc is connected to, sorted by
// name, each with its workers: what `orchestrator tools --workers`
// prints. ctx bounds the reading; logger (nil: slog.Default()) receives
// the warnings of the catalog's watch.
func LiveTools(ctx context.Context, nc *nats.Conn, logger *slog.Logger) ([]LiveTool, error) {
	j, err := js.New(nc)
	if err != nil {
		return nil, err
	}
	live, err := discovery.NewCatalog(discovery.CatalogConfig{JetStream: j, Logger: logger})
	if err != nil {
		return nil, err
	}
	if err := live.Start(ctx); err != nil {
		return nil, err
	}
	defer live.Stop(context.WithoutCancel(ctx))
	found := ops.LiveTools(ctx, live)
	out := make([]LiveTool, len(found))
	for i, t := range found {
		out[i] = LiveTool{
			Definition: t.Definition, Cost: t.Cost, Cache: t.Cache, Approval: t.Approval, Version: t.Version,
			Workers: make([]LiveWorker, len(t.Workers)),
		}
		for k, w := range t.Workers {
			out[i].Workers[k] = LiveWorker(w)
		}
	}
	return out, nil
}
