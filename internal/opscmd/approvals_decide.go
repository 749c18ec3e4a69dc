package opscmd

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
)

// approvalsDecide is "approvals approve ID" (approve) or "approvals deny
// ID".
func approvalsDecide(approve bool) *cli.Command {
	var (
		f      approvalFlags
		reason string
		as     string
		asJSON bool
	)
	name, summary := "deny", "deny a pending call: the model is told it was not approved, with --reason"
	if approve {
		name, summary = "approve", "approve a pending call: it runs"
	}
	return &cli.Command{
		Name:         name,
		Args:         "[--reason R] [--as NAME] [--json] ID",
		Summary:      summary,
		MinArgs:      1,
		MaxArgs:      1,
		Interspersed: true,
		Flags: func(fs *flag.FlagSet) {
			f.nats.Register(fs)
			fs.StringVar(&reason, "reason", "", "why, recorded with the decision (and told to the model for a denial)")
			fs.StringVar(&as, "as", "", "who decides, recorded with the decision (default: the OS user's name)")
			fs.BoolVar(&asJSON, "json", false, "print the decided record as JSON")
		},
		Run: func(ctx context.Context, env *cli.Env, args []string) error {
			id, err := approvalID(args[0])
			if err != nil {
				return err
			}
			if !env.Given("as") {
				as = osUser()
			}
			if as == "" {
				return cli.Usagef("--as: say who decides (the OS user has no name)")
			}
			nc, s, err := f.connect(env)
			if err != nil {
				return err
			}
			defer nc.Close()
			r, err := s.Decide(ctx, id, approve, as, reason, approval.ViaCLI)
			if errors.Is(err, approval.ErrInvalid) {
				return cli.Usagef("%s", usageOf(err))
			}
			if err != nil {
				return err
			}
			if asJSON {
				return cli.WriteJSON(env.Stdout, r)
			}
			fmt.Fprintf(env.Stdout, "%s %s: %s for tenant %s, session %s, call %s, by %s\n", r.State, r.ID, printable(r.Tool),
				orDash(printable(r.Tenant)), orDash(printable(r.Session)), printable(r.CallID), printable(r.DecidedBy))
			return nil
		},
	}
}

// usageOf is a Decide error about its words as the flags name them:
// "by: …" is --as, "reason: …" is --reason.
func usageOf(err error) string {
	msg := err.Error()
	for _, p := range [][2]string{{"invalid decision: by: ", "--as: "}, {"invalid decision: reason: ", "--reason: "}} {
		if len(msg) >= len(p[0]) && msg[:len(p[0])] == p[0] {
			return p[1] + msg[len(p[0]):]
		}
	}
	return msg
}
