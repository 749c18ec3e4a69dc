package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/pkg/tools"
)

// liveTool is one tool as "orchestrator tools --workers" prints it: its
// definition and the workers serving it.
type liveTool struct {
	tools.Definition
	Workers []liveWorker `json:"workers"`
}

type liveWorker struct {
	WorkerID    string    `json:"worker_id"`
	Timeout     string    `json:"timeout"`
	MaxAttempts int       `json:"max_attempts"`
	Concurrency int       `json:"concurrency,omitempty"`
	StartedAt   time.Time `json:"started_at"`
}

// toolsCmd prints the live tool definitions (those at least one live worker
// announces) as a JSON array in the Anthropic tools format; --workers adds
// each tool's workers. Exit 0, or 2 on usage or connection errors.
func toolsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newLiveCommand("tools", "Prints the live tools (those at least one running worker serves) as a JSON array\nin the Anthropic Messages API tools format.", stderr)
	withWorkers := c.fs.Bool("workers", false, "also list the live workers of each tool")
	env, done, err := c.open(ctx, args)
	if err != nil {
		return exitCode(err)
	}
	defer done()
	ctx, live := env.ctx, env.live

	var out any
	defs := live.Definitions(ctx)
	if *withWorkers {
		list := make([]liveTool, 0, len(defs))
		for _, def := range defs {
			lt := liveTool{Definition: def, Workers: []liveWorker{}}
			for _, a := range live.Workers(ctx, def.Name) {
				lt.Workers = append(lt.Workers, liveWorker{
					WorkerID: a.WorkerID, Timeout: a.Timeout.String(), MaxAttempts: a.MaxAttempts,
					Concurrency: a.Concurrency, StartedAt: a.StartedAt,
				})
			}
			list = append(list, lt)
		}
		out = list
	} else {
		if defs == nil {
			defs = []tools.Definition{}
		}
		out = defs
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator tools:", err)
		return cli.ExitIsError
	}
	fmt.Fprintln(stdout, string(data))
	return cli.ExitOK
}
