package main

import (
	"context"
	"flag"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/pkg/tools"
)

// toolsCommand is "orchestrator tools": the live tool definitions (those
// at least one live worker announces) as a JSON array in the Anthropic
// tools format; --workers adds each tool's workers. Exit 0, or 2 on usage
// or connection errors.
func toolsCommand() *cli.Command {
	var (
		lf          liveFlags
		withWorkers bool
	)
	return &cli.Command{
		Name:    "tools",
		Summary: "print the live tool definitions (Anthropic tools format); --workers adds who serves each",
		Help:    "Prints the live tools (those at least one running worker serves) as a JSON array\nin the Anthropic Messages API tools format.",
		Flags: func(fs *flag.FlagSet) {
			lf.register(fs)
			fs.BoolVar(&withWorkers, "workers", false, "also list the live workers of each tool")
		},
		Run: func(ctx context.Context, env *cli.Env, _ []string) error {
			live, err := lf.open(ctx, env)
			if err != nil {
				return err
			}
			defer live.close()
			if withWorkers {
				return cli.WriteJSON(env.Stdout, ops.LiveTools(live.ctx, live.catalog))
			}
			defs := live.catalog.Definitions(live.ctx)
			if defs == nil {
				defs = []tools.Definition{}
			}
			return cli.WriteJSON(env.Stdout, defs)
		},
	}
}
