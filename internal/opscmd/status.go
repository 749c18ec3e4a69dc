package opscmd

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/fleet/ops"
)

// Status is "orchestrator status": per tool, the calls pending, in
// flight and redelivered, the dead letters, whether the tool is paused,
// and its live workers; with --by-key, the orchestrators' schedulers per
// tool and fairness key (statusByKey). Exit 0, 1 when the state cannot be
// read, 2 on usage or connection errors.
func Status() *cli.Command {
	var (
		lf     liveFlags
		asJSON bool
		byKey  bool
	)
	return &cli.Command{
		Name:    "status",
		Summary: "per tool: pending, in flight, redelivered, dead-lettered, paused until, live workers (--by-key: fair shares per key)",
		Help: "Per tool: calls pending (queued, not yet delivered), in flight (delivered, not yet\nacknowledged, retries waiting included), redelivered, dead-lettered, paused until,\nand live workers. Then per budget: whose calls, spent of the limit, resets in\n(not with --json: orchestrator budgets ls --json).\n\n" +
			"With --by-key: the orchestrators' fair-share schedulers, summed over every\norchestrator that answers, per tool and fairness key: weight, calls waiting for\ntheir turn, waiting on a per-key limit, in flight, served per second, and the\nper-key limits the fleet applies.",
		Flags: func(fs *flag.FlagSet) {
			lf.register(fs)
			fs.BoolVar(&asJSON, "json", false, "print JSON")
			fs.BoolVar(&byKey, "by-key", false, "per tool and fairness key, from every orchestrator's scheduler")
		},
		Run: func(ctx context.Context, env *cli.Env, _ []string) error {
			if byKey {
				return statusByKey(ctx, env, &lf, asJSON)
			}
			live, err := lf.open(ctx, env)
			if err != nil {
				return err
			}
			defer live.close()
			st, err := ops.Status(live.ctx, live.js, live.catalog)
			if err != nil {
				return err
			}
			if asJSON {
				return cli.WriteJSON(env.Stdout, st)
			}
			if len(st) == 0 {
				fmt.Fprintln(env.Stderr, "no tools: no worker has served one yet")
			} else {
				writeStatus(env, st, time.Now())
			}
			statusBudgets(live.ctx, env, live.js)
			return nil
		},
	}
}

// writeStatus prints the status table.
func writeStatus(env *cli.Env, st []ops.ToolStatus, now time.Time) {
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tPENDING\tIN FLIGHT\tREDELIVERED\tDEAD-LETTERED\tPAUSED UNTIL\tLIVE WORKERS")
	for _, t := range st {
		paused := "-"
		if t.Paused(now) {
			paused = t.PausedUntil.Local().Format("15:04:05") + " (" + t.PausedUntil.Sub(now).Round(time.Second).String() + ")"
		}
		pending, inFlight, redelivered := "-", "-", "-"
		if t.Consumer {
			pending, inFlight, redelivered = strconv.FormatUint(t.Pending, 10), strconv.Itoa(t.InFlight), strconv.Itoa(t.Redelivered)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\n", t.Tool, pending, inFlight, redelivered, t.DeadLetters, paused, len(t.Workers))
	}
	_ = tw.Flush()
}
