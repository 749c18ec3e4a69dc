package opscmd

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
)

// approvalsShow is "approvals show ID": one approval, its input pretty.
func approvalsShow() *cli.Command {
	var (
		f      approvalFlags
		asJSON bool
	)
	return &cli.Command{
		Name:         "show",
		Args:         "[--json] ID",
		Summary:      "one approval: the call's input, tenant, session, binding, age, deadline, decision, its use and earlier approvals",
		MinArgs:      1,
		MaxArgs:      1,
		Interspersed: true,
		Flags: func(fs *flag.FlagSet) {
			f.nats.Register(fs)
			fs.BoolVar(&asJSON, "json", false, "print the record as JSON")
		},
		Run: func(ctx context.Context, env *cli.Env, args []string) error {
			id, err := approvalID(args[0])
			if err != nil {
				return err
			}
			nc, s, err := f.connect(env)
			if err != nil {
				return err
			}
			defer nc.Close()
			r, err := s.Get(ctx, id)
			if err != nil {
				return err
			}
			if asJSON {
				return cli.WriteJSON(env.Stdout, r)
			}
			writeApproval(env.Stdout, &r, time.Now())
			return nil
		},
	}
}

// writeApproval prints an approval for a person.
func writeApproval(w io.Writer, r *approval.Record, now time.Time) {
	fmt.Fprintf(w, "approval %s: %s\n\n", r.ID, stateLine(r, now))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("tool:", printable(r.Tool))
	row("tenant:", orDash(printable(r.Tenant)))
	row("session:", orDash(printable(r.Session)))
	row("call id:", printable(r.CallID))
	row("api key:", printable(r.KeyName))
	row("binding:", "sha256:"+r.Binding)
	row("held at:", r.CreatedAt.Local().Format(time.RFC3339))
	row("deadline:", r.Deadline().Local().Format(time.RFC3339)+" (timeout "+r.Timeout.String()+")")
	if r.State != approval.StatePending {
		row("decided at:", r.DecidedAt.Local().Format(time.RFC3339))
		row("decided by:", printable(r.DecidedBy))
		row("via:", r.Via)
		row("reason:", printable(r.Reason))
	}
	if !r.UsedAt.IsZero() {
		row("let through:", r.UsedAt.Local().Format(time.RFC3339)+" (an approval is for one run)")
	}
	_ = tw.Flush()
	if len(r.Previous) > 0 {
		fmt.Fprintln(w, "\napproved before, each approval spent by a run (the call was held again after it):")
		for _, p := range r.Previous {
			line := fmt.Sprintf("  held %s, approved by %s", p.HeldAt.Local().Format(time.RFC3339), printable(p.ApprovedBy))
			if p.Via != "" {
				line += " via " + p.Via
			}
			line += " at " + p.ApprovedAt.Local().Format(time.RFC3339) + ", let through " + p.UsedAt.Local().Format(time.RFC3339)
			if p.Reason != "" {
				line += ": " + printable(p.Reason)
			}
			fmt.Fprintln(w, line)
		}
	}
	fmt.Fprintln(w, "\ninput:")
	var buf bytes.Buffer
	if err := json.Indent(&buf, r.Input, "  ", "  "); err == nil {
		fmt.Fprintf(w, "  %s\n", buf.Bytes())
	} else {
		fmt.Fprintf(w, "  %q\n", r.Input)
	}
}
