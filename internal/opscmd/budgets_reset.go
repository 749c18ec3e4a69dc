package opscmd

import (
	"context"
	"flag"
	"time"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/orchestrator/budget"
)

// budgetsReset is "budgets reset": the spending of a budget back to 0.
func budgetsReset() *cli.Command {
	var nf cli.NATSFlags
	return &cli.Command{
		Name:         "reset",
		Args:         "NAME",
		Summary:      "give a budget room again: its spending back to 0, in this period",
		MinArgs:      1,
		MaxArgs:      1,
		Interspersed: true,
		Flags:        func(fs *flag.FlagSet) { nf.Register(fs) },
		Run: func(ctx context.Context, env *cli.Env, args []string) error {
			return budgetAdmin(ctx, env, &nf, args[0], "reset: its spending is 0 again", func(ctx context.Context, name string, j budgetJS) error {
				return budget.Reset(ctx, j, name, time.Now())
			})
		},
	}
}

// budgetsRm is "budgets rm": delete a budget.
func budgetsRm() *cli.Command {
	var nf cli.NATSFlags
	return &cli.Command{
		Name:         "rm",
		Aliases:      []string{"remove"},
		Args:         "NAME",
		Summary:      "delete a budget and its spending",
		MinArgs:      1,
		MaxArgs:      1,
		Interspersed: true,
		Flags:        func(fs *flag.FlagSet) { nf.Register(fs) },
		Run: func(ctx context.Context, env *cli.Env, args []string) error {
			return budgetAdmin(ctx, env, &nf, args[0], "removed", func(ctx context.Context, name string, j budgetJS) error {
				return budget.Remove(ctx, j, name)
			})
		},
	}
}
