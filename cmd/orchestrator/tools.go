package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/pkg/discovery"
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
	fs := flag.NewFlagSet("orchestrator tools", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: orchestrator tools [flags]\n\nPrints the live tools (those at least one running worker serves) as a JSON array\nin the Anthropic Messages API tools format.\n\nflags:")
		fs.PrintDefaults()
	}
	var natsFlags cli.NATSFlags
	natsFlags.Register(fs)
	withWorkers := fs.Bool("workers", false, "also list the live workers of each tool")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the server")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "orchestrator tools: unexpected argument %q\n", fs.Arg(0))
		return cli.ExitUsage
	}
	if *timeout <= 0 {
		fmt.Fprintln(stderr, "orchestrator tools: --timeout must be positive")
		return cli.ExitUsage
	}

	log := cli.WarnLogger(stderr)
	nc, jsCtx, err := natsFlags.ConnectJetStream("toolpool-tools", log)
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator tools:", err)
		return cli.ExitUsage
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	live, err := discovery.NewCatalog(ctx, discovery.CatalogConfig{JetStream: jsCtx, Logger: log})
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator tools:", err)
		return cli.ExitUsage
	}
	defer live.Close()

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
