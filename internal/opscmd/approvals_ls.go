package opscmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
)

// approvalsLs is "approvals ls": the pending approvals, the soonest
// deadline first; with --all, then the decided ones kept.
func approvalsLs() *cli.Command {
	var (
		f      approvalFlags
		all    bool
		asJSON bool
	)
	return &cli.Command{
		Name:         "ls",
		Aliases:      []string{"list"},
		Args:         "[--all] [--json]",
		Summary:      "list the pending approvals: id, tool, tenant, session, age, deadline (--all: the decided ones too)",
		Interspersed: true,
		Flags: func(fs *flag.FlagSet) {
			f.nats.Register(fs)
			fs.BoolVar(&all, "all", false, "list the decided approvals kept too, after the pending ones")
			fs.BoolVar(&asJSON, "json", false, "print a JSON array of the records")
		},
		Run: func(ctx context.Context, env *cli.Env, _ []string) error {
			var list []approval.Record
			nc, s, err := f.connect(env)
			switch {
			case errors.Is(err, approval.ErrNoBucket): // none yet
			case err != nil:
				return err
			default:
				defer nc.Close()
				if list, err = s.List(ctx, all); err != nil {
					return err
				}
			}
			if asJSON {
				if list == nil {
					list = []approval.Record{}
				}
				return cli.WriteJSON(env.Stdout, list)
			}
			if len(list) == 0 {
				if all {
					fmt.Fprintln(env.Stderr, "no approvals")
				} else {
					fmt.Fprintln(env.Stderr, "no pending approvals")
				}
				return nil
			}
			writeApprovals(env, list, time.Now())
			return nil
		},
	}
}

// writeApprovals prints the ls table.
func writeApprovals(env *cli.Env, list []approval.Record, now time.Time) {
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tTOOL\tTENANT\tSESSION\tAGE\tDEADLINE\tDECIDED BY\tINPUT")
	for i := range list {
		r := &list[i]
		deadline, by := "-", "-"
		if r.State == approval.StatePending {
			deadline = "in " + ops.Age(r.Deadline().Sub(now))
		} else if r.DecidedBy != "" {
			by = printable(r.DecidedBy)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.State, printable(r.Tool), orDash(printable(r.Tenant)),
			orDash(printable(r.Session)), ops.Age(now.Sub(r.CreatedAt)), deadline, by, ops.OneLine(string(r.Input), 60))
	}
	_ = tw.Flush()
}
