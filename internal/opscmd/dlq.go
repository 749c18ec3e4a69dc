package opscmd

import (
	"context"
	"flag"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
)

// DLQ is "orchestrator dlq": a group, one file per subcommand
// (dlq_ls.go, dlq_show.go, dlq_replay.go, dlq_purge.go). Exit 0 on
// success, 1 when a command failed (or a replayed call failed with
// --wait), 2 on usage or connection errors.
func DLQ() *cli.Command {
	return &cli.Command{
		Name:    "dlq",
		Summary: "operate the dead letters: dlq ls|show|replay|purge (orchestrator dlq -h)",
		Help: `Operates the dead letters in TOOL_DLQ: calls set aside because their
retries ran out (exhausted), they could not be decoded (malformed), they
kept killing workers (poison), their deadline passed in the queue
(expired), or an attempt of a tool that is not idempotent started and
never reported, so it was not run again (outcome_unknown).

Every command takes --nats-url (env NATS_URL) and the credential flags.`,
		Commands: []*cli.Command{dlqLs(), dlqShow(), dlqReplay(), dlqPurge()},
	}
}

// dlqFlags are the flags the dlq subcommands share: the connection and,
// with filters, --tool and --reason.
type dlqFlags struct {
	nats   cli.NATSFlags
	tool   string
	reason string
}

// register adds the connection's flags to fs and, with filters, --tool
// and --reason.
func (f *dlqFlags) register(fs *flag.FlagSet, filters bool) {
	f.nats.Register(fs)
	if filters {
		fs.StringVar(&f.tool, "tool", "", "only the dead letters of this tool")
		fs.StringVar(&f.reason, "reason", "", "only the dead letters with this reason: "+classify.DeadLetterReasonList())
	}
}

// filter is the Filter of --tool and --reason; a usage error for a
// reason there is none of.
func (f *dlqFlags) filter() (dlq.Filter, error) {
	if _, err := classify.ParseDeadLetterReason(f.reason); err != nil {
		return dlq.Filter{}, cli.Usagef("--reason %q: want %s", f.reason, classify.DeadLetterReasonList())
	}
	if f.tool != "" {
		// A wildcard would select every tool's dead letters.
		if err := jetstream.CheckToken("--tool", f.tool); err != nil {
			return dlq.Filter{}, cli.Usagef("%v", err)
		}
	}
	return dlq.Filter{Tool: f.tool, Reason: classify.Fate(f.reason)}, nil
}

// selection is what replay and purge act on: the sequences given, or
// --all with the filter; exactly one of them, and --tool and --reason only
// with --all.
func (f *dlqFlags) selection(all bool, args []string) (dlq.Filter, []uint64, error) {
	filter, err := f.filter()
	if err != nil {
		return filter, nil, err
	}
	if all == (len(args) > 0) {
		return filter, nil, cli.Usagef("give the dead letters' sequences, or --all")
	}
	if len(args) > 0 && (f.tool != "" || f.reason != "") {
		return filter, nil, cli.Usagef("--tool and --reason go with --all, not with sequences")
	}
	seqs, err := parseSeqs(args)
	return filter, seqs, err
}

// connect connects and binds to TOOL_DLQ; its error exits 2.
func (f *dlqFlags) connect(env *cli.Env) (*nats.Conn, js.JetStream, *dlq.Store, error) {
	nc, j, err := f.nats.ConnectJetStream("toolpool-dlq", cli.WarnLogger(env.Stderr))
	if err != nil {
		return nil, nil, nil, cli.Unavailable(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := dlq.NewStore(ctx, j)
	if err != nil {
		nc.Close()
		return nil, nil, nil, cli.Unavailable(err)
	}
	return nc, j, s, nil
}

// parseSeqs reads dead-letter sequences.
func parseSeqs(args []string) ([]uint64, error) {
	seqs := make([]uint64, 0, len(args))
	for _, a := range args {
		seq, err := strconv.ParseUint(a, 10, 64)
		if err != nil || seq == 0 {
			return nil, cli.Usagef("%q is not a dead letter's sequence (a positive number, as dlq ls shows)", a)
		}
		seqs = append(seqs, seq)
	}
	return seqs, nil
}

// letterJSON is a dead letter as the --json outputs print it.
type letterJSON struct {
	Seq     uint64        `json:"seq"`
	Subject string        `json:"subject"`
	Stored  time.Time     `json:"stored"`
	Tool    string        `json:"tool"`
	Reason  classify.Fate `json:"reason"`
	Entry   *settle.Entry `json:"entry,omitempty"`
	Error   string        `json:"decode_error,omitempty"`
}

// toJSON is l as the --json outputs print it.
func toJSON(l *dlq.Letter) letterJSON {
	out := letterJSON{Seq: l.Seq, Subject: l.Subject, Stored: l.Stored, Tool: l.Tool(), Reason: l.Reason(), Entry: l.Entry}
	if l.Err != nil {
		out.Error = l.Err.Error()
	}
	return out
}

// orDash is s, or "-" for nothing.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
