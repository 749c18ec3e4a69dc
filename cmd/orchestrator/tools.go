package main

import (
	"context"
	"flag"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/cli"
)

// toolsCommand is "orchestrator tools": the live tool definitions (those
// at least one live worker announces) as a JSON array in the Anthropic
// tools format; --workers adds each tool's workers, and its cost, cache
// and approval rule when it has them. Exit 0, or 2 on usage
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
			fs.BoolVar(&withWorkers, "workers", false, "also list the live workers of each tool, and its cost, cache and approval rule")
		},
		Run: func(ctx context.Context, env *cli.Env, _ []string) error {
			ctx, nc, release, err := lf.connect(ctx, env)
			if err != nil {
				return err
			}
			defer release()
			live, err := toolpool.LiveTools(ctx, nc, cli.WarnLogger(env.Stderr))
			if err != nil {
				return cli.Unavailable(err)
			}
			if withWorkers {
				return cli.WriteJSON(env.Stdout, live)
			}
			defs := make([]toolpool.ToolDefinition, len(live))
			for i, t := range live {
				defs[i] = t.Definition
			}
			return cli.WriteJSON(env.Stdout, defs)
		},
	}
}
