package opscmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
)

// Approvals is "orchestrator approvals": a group, ls|show|approve|deny
// (approvals_ls.go, approvals_show.go, approvals_decide.go). Exit 0 on
// success, 1 when the approval is not there or was decided before (or
// timed out), 2 on usage or connection errors.
func Approvals() *cli.Command {
	return &cli.Command{
		Name:    "approvals",
		Summary: "decide the tool calls held for approval: approvals ls|show|approve|deny (orchestrator approvals -h)",
		Help: `Lists, shows and decides the tool calls held for a person's approval
(a tool's catalog rule approval:) in the toolpool_approvals bucket. A
held call runs once it is approved; a denial or its timeout answers the
model that the call was not approved (with the reason given). Each
approval is decided once: a second decision is refused and names the
first. An approval is for one run: the same call sent again after its
result expired is held again (pending, its earlier approvals listed by
show), for a new decision.

Every command takes --nats-url (env NATS_URL) and the credential flags.`,
		Commands: []*cli.Command{approvalsLs(), approvalsShow(), approvalsDecide(true), approvalsDecide(false)},
	}
}

// approvalFlags are the flags the approvals subcommands share.
type approvalFlags struct {
	nats cli.NATSFlags
}

// connect connects and opens the bucket; its error exits 2, but for a
// bucket not created yet (approval.ErrNoBucket), which the caller tells.
func (f *approvalFlags) connect(env *cli.Env) (*nats.Conn, *approval.Store, error) {
	nc, j, err := f.nats.ConnectJetStream("toolpool-approvals", cli.WarnLogger(env.Stderr))
	if err != nil {
		return nil, nil, cli.Unavailable(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The audit line of a decision made here goes to stderr.
	audit := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := approval.Open(ctx, approval.Config{JS: j, Logger: audit})
	if err != nil {
		nc.Close()
		if errors.Is(err, approval.ErrNoBucket) {
			return nil, nil, err
		}
		return nil, nil, cli.Unavailable(err)
	}
	return nc, s, nil
}

// approvalID checks an approval id argument.
func approvalID(arg string) (string, error) {
	if !approval.ValidID(arg) {
		return "", cli.Usagef("%q is not an approval id (ap- and 20 hex characters, as approvals ls shows)", arg)
	}
	return arg, nil
}

// osUser is the name of the user running the command: --as's default.
func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

// printable is s for a terminal: as it is, or quoted when it holds
// control characters (a tenant, session or call id comes from callers).
func printable(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// stateLine says where an approval is, for a person: "pending (times out
// in 12m)", "approved by alice 3m ago via cli".
func stateLine(r *approval.Record, now time.Time) string {
	switch r.State {
	case approval.StatePending:
		return "pending, times out in " + ops.Age(r.Deadline().Sub(now))
	case approval.StateTimedOut:
		return "timed out " + ops.Age(now.Sub(r.DecidedAt)) + " ago (no decision within " + r.Timeout.String() + ")"
	}
	s := fmt.Sprintf("%s by %s %s ago", r.State, printable(r.DecidedBy), ops.Age(now.Sub(r.DecidedAt)))
	if r.Via != "" {
		s += " via " + r.Via
	}
	return s
}
