package opscmd

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strings"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/infra/subject"
	"github.com/toolpool/toolpool/internal/orchestrator/budget"
)

// budgetFlags are the flags of "budgets set".
type budgetFlags struct {
	nats           cli.NATSFlags
	tenant, key    string
	tools          string
	period, window string
	limit          int64
	cost           bool
	soft           float64
}

// def is the budget the flags define, or a usage error naming the flag.
func (f *budgetFlags) def(env *cli.Env, name string) (budget.Def, error) {
	d := budget.Def{Name: name, Tenant: f.tenant, Key: f.key, Period: budget.Period(f.period), Limit: f.limit, Cost: f.cost}
	switch {
	case f.tenant != "" && f.key != "":
		return d, cli.Usagef("give --tenant or --key, not both")
	case f.tenant == "" && f.key == "":
		return d, cli.Usagef("--tenant or --key is required: whose calls the budget counts")
	case f.period != "" && f.window != "":
		return d, cli.Usagef("give --period or --window, not both")
	case f.period == "" && f.window == "":
		return d, cli.Usagef("--period (minute, hour, day, month) or --window (a rolling window, e.g. 90m) is required")
	case !env.Given("limit"):
		return d, cli.Usagef("--limit is required: the calls (with --cost: the cost units) allowed per period")
	case f.limit < 1:
		return d, cli.Usagef("--limit must be at least 1, got %d", f.limit)
	case env.Given("soft") && (math.IsNaN(f.soft) || f.soft <= 0 || f.soft > 1):
		return d, cli.Usagef("--soft must be above 0 and at most 1 (the share of the limit past which results carry a note; 1: none), got %v", f.soft)
	}
	switch budget.Period(f.period) {
	case "", budget.Minute, budget.Hour, budget.Day, budget.Month:
	default:
		return d, cli.Usagef("--period %q: want minute, hour, day or month (or --window for a rolling one)", f.period)
	}
	if f.window != "" {
		w, err := parseWindow(f.window)
		if err != nil {
			return d, err
		}
		if w < budget.MinWindow || w > budget.MaxWindow || w%1e9 != 0 {
			return d, cli.Usagef("--window %s: must be whole seconds from 1m to 31d", f.window)
		}
		d.Window = w
	}
	for _, t := range strings.Split(f.tools, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if !subject.ValidToken(t) {
			return d, cli.Usagef("--tools: %q is not a tool name: %s", t, subject.TokenRule)
		}
		d.Tools = append(d.Tools, t)
	}
	if env.Given("soft") {
		d.Soft = f.soft
	}
	if err := d.Validate(); err != nil {
		return d, cli.Usagef("%v", err)
	}
	return d, nil
}

// budgetsSet is "budgets set": define a budget, or change one.
func budgetsSet() *cli.Command {
	var f budgetFlags
	return &cli.Command{
		Name:    "set",
		Args:    "NAME (--tenant T | --key K) [--tools a,b] (--period day | --window 90m) --limit N [--cost] [--soft 0.8]",
		Summary: "define a budget, or change one (its spending so far stays)",
		Help: `Defines the budget NAME, or changes it: its spending so far in the current
period stays, and counts against the new limit.

  orchestrator budgets set acme-daily --tenant acme --period day --limit 10000
  orchestrator budgets set ci-search --key ci-bot --tools search,fetch --window 90m --limit 500 --cost

A budget counts the calls of a tenant (--tenant) or of one API key (--key, the
key's name:), to every tool or to the tools listed (--tools). --limit is in
calls, or with --cost in the tools' cost units (a catalog entry's cost:,
default 1). Past --soft of the limit (default 0.8; 1: never) a call's result
carries a sentence telling the agent what is left. The orchestrators pick up
the change within a moment.`,
		MinArgs:      1,
		MaxArgs:      1,
		Interspersed: true,
		Flags: func(fs *flag.FlagSet) {
			f.nats.Register(fs)
			fs.StringVar(&f.tenant, "tenant", "", "the tenant whose calls the budget counts")
			fs.StringVar(&f.key, "key", "", "the API key (its name:) whose calls the budget counts")
			fs.StringVar(&f.tools, "tools", "", "the tools it covers, comma-separated (default: every tool)")
			fs.StringVar(&f.period, "period", "", "calendar period, UTC: minute, hour, day or month")
			fs.StringVar(&f.window, "window", "", "rolling window instead, from 1m to 31d (e.g. 90m, 36h, 7d)")
			fs.Int64Var(&f.limit, "limit", 0, "calls (with --cost: cost units) allowed per period, at least 1")
			fs.BoolVar(&f.cost, "cost", false, "count the tools' cost units, not calls")
			fs.Float64Var(&f.soft, "soft", budget.SoftDefault, "share of the limit past which results carry a note (0 < soft <= 1; 1: none)")
		},
		Run: func(ctx context.Context, env *cli.Env, args []string) error {
			if err := budgetName(args[0]); err != nil {
				return err
			}
			d, err := f.def(env, args[0])
			if err != nil {
				return err
			}
			nc, j, err := connectBudgets(env, &f.nats)
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, cancel := budgetCtx(ctx)
			defer cancel()
			if err := budget.Set(ctx, j, d); err != nil {
				return err
			}
			tools := "every tool"
			if len(d.Tools) > 0 {
				tools = strings.Join(d.Tools, ", ")
			}
			fmt.Fprintf(env.Stdout, "budget %s set: %s, %s, %d %s %s\n", d.Name, d.Who(), tools, d.Limit, d.Unit(), d.PeriodWords())
			return nil
		},
	}
}
