package opscmd

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/fleet/backlog"
	"github.com/toolpool/toolpool/internal/fleet/ops"
)

// Status is "orchestrator status": per tool, the calls pending, in
// flight and redelivered, the dead letters, whether the tool is paused,
// and its live workers; with --by-key, the orchestrators' schedulers per
// tool and fairness key (statusByKey). Exit 0, 1 when the state cannot be
// read, 2 on usage or connection errors.
func Status() *cli.Command {
	var (
		lf         liveFlags
		asJSON     bool
		byKey      bool
		backlogAge time.Duration
	)
	return &cli.Command{
		Name:    "status",
		Summary: "per tool: pending, in flight, redelivered, dead-lettered, paused until, live workers (--by-key: fair shares per key)",
		Help: "Per tool: calls pending (queued, not yet delivered), in flight (delivered, not yet\nacknowledged, retries waiting included), redelivered, dead-lettered, paused until,\nlive workers, the age of the oldest queued call and the backlog's state (ok,\nbacking_up past --backlog-age, stalled: calls queued and no live worker or paused).\nThen per budget: whose calls, spent of the limit, resets in\n(not with --json: orchestrator budgets ls --json).\n\n" +
			"With --by-key: the orchestrators' fair-share schedulers, summed over every\norchestrator that answers, per tool and fairness key: weight, calls waiting for\ntheir turn, waiting on a per-key limit, in flight, served per second, and the\nper-key limits the fleet applies.",
		Flags: func(fs *flag.FlagSet) {
			lf.register(fs)
			fs.BoolVar(&asJSON, "json", false, "print JSON")
			fs.BoolVar(&byKey, "by-key", false, "per tool and fairness key, from every orchestrator's scheduler")
			fs.DurationVar(&backlogAge, "backlog-age", backlog.BacklogAgeDefault, "a tool whose oldest queued call is older than this is backing up")
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
			if backlogAge <= 0 {
				return cli.Usagef("--backlog-age must be positive, e.g. 30s")
			}
			st, err := ops.Status(live.ctx, live.js, live.catalog)
			if err != nil {
				return err
			}
			rows := withBacklog(live.ctx, live, st, backlogAge)
			if asJSON {
				return cli.WriteJSON(env.Stdout, rows)
			}
			if len(st) == 0 {
				fmt.Fprintln(env.Stderr, "no tools: no worker has served one yet")
			} else {
				writeStatus(env, rows, time.Now())
			}
			statusBudgets(live.ctx, env, live.js)
			return nil
		},
	}
}

// writeStatus prints the status table.
func writeStatus(env *cli.Env, st []statusRow, now time.Time) {
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tPENDING\tIN FLIGHT\tREDELIVERED\tDEAD-LETTERED\tPAUSED UNTIL\tLIVE WORKERS\tOLDEST QUEUED\tBACKLOG")
	for _, t := range st {
		paused := "-"
		if t.Paused(now) {
			paused = t.PausedUntil.Local().Format("15:04:05") + " (" + t.PausedUntil.Sub(now).Round(time.Second).String() + ")"
		}
		pending, inFlight, redelivered := "-", "-", "-"
		if t.Consumer {
			pending, inFlight, redelivered = strconv.FormatUint(t.Pending, 10), strconv.Itoa(t.InFlight), strconv.Itoa(t.Redelivered)
		}
		oldest, state := "-", "-"
		if t.Backlog != "" {
			state = t.Backlog
			if t.Pending > 0 {
				oldest = ops.Age(time.Duration(t.OldestAgeSeconds * float64(time.Second)))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", t.Tool, pending, inFlight, redelivered, t.DeadLetters, paused,
			len(t.Workers), oldest, state)
	}
	_ = tw.Flush()
}
