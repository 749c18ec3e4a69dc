package opscmd

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/jetstream"
)

// dlqShow is "dlq show SEQ": one dead letter, its call and every
// attempt.
func dlqShow() *cli.Command {
	var (
		f      dlqFlags
		asJSON bool
	)
	return &cli.Command{
		Name:         "show",
		Args:         "[--json] SEQ",
		Summary:      "one dead letter: the call envelope and every attempt",
		MinArgs:      1,
		MaxArgs:      1,
		Interspersed: true,
		Flags: func(fs *flag.FlagSet) {
			f.register(fs, false)
			fs.BoolVar(&asJSON, "json", false, "print the dead letter as JSON")
		},
		Run: func(ctx context.Context, env *cli.Env, args []string) error {
			seqs, err := parseSeqs(args)
			if err != nil {
				return err
			}
			nc, _, s, err := f.connect(env)
			if err != nil {
				return err
			}
			defer nc.Close()
			l, err := s.Get(ctx, seqs[0])
			if err != nil {
				return err
			}
			if asJSON {
				return cli.WriteJSON(env.Stdout, toJSON(l))
			}
			writeLetter(env.Stdout, l, time.Now())
			return nil
		},
	}
}

// writeLetter prints a dead letter for a person.
func writeLetter(w io.Writer, l *dlq.Letter, now time.Time) {
	fmt.Fprintf(w, "dead letter %d (%s), stored %s (%s ago)\n\n", l.Seq, l.Subject,
		l.Stored.Local().Format(time.RFC3339), ops.Age(now.Sub(l.Stored)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	e := l.Entry
	if e == nil {
		row("reason:", string(l.Reason()))
		row("tool:", l.Tool())
		row("unreadable:", l.Err.Error())
		_ = tw.Flush()
		fmt.Fprintf(w, "\nbody:\n%s\n", l.Data)
		return
	}
	row("reason:", string(e.Reason))
	row("tool:", e.Tool)
	row("call id:", e.CallID)
	row("error:", ops.OneLine(e.Error, 400))
	if !e.FirstFailure.IsZero() {
		row("first failure:", e.FirstFailure.Local().Format(time.RFC3339Nano))
	}
	if !e.LastFailure.IsZero() {
		row("last failure:", e.LastFailure.Local().Format(time.RFC3339Nano))
	}
	row("attempts:", strconv.Itoa(e.AttemptCount()))
	if e.Deliveries > 0 {
		row("deliveries:", strconv.Itoa(e.Deliveries))
	}
	if e.SourceSeq > 0 {
		row("was:", fmt.Sprintf("%s sequence %d", jetstream.StreamCalls, e.SourceSeq))
	}
	_ = tw.Flush()

	fmt.Fprintln(w, "\ncall:")
	switch {
	case len(e.Call) > 0:
		var buf bytes.Buffer
		if err := json.Indent(&buf, e.Call, "  ", "  "); err == nil {
			fmt.Fprintf(w, "  %s\n", buf.Bytes())
		} else {
			fmt.Fprintf(w, "  %s\n", e.Call)
		}
	default:
		fmt.Fprintf(w, "  (not JSON, %d bytes) %q\n", len(e.RawCall), ops.OneLine(string(e.RawCall), 200))
	}

	fmt.Fprintln(w, "\nattempt history:")
	if len(e.Attempts) == 0 {
		fmt.Fprintln(w, "  (no attempt recorded)")
		return
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tSTARTED\tDURATION\tWORKER\tCLASS\tCODE\tMESSAGE")
	for _, a := range e.Attempts {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.N, a.Started.Local().Format("2006-01-02 15:04:05.000"),
			ops.ShortDuration(a.Duration), orDash(a.WorkerID), orDash(string(a.Class)), orDash(a.Code), ops.OneLine(a.Message, 120))
	}
	_ = tw.Flush()
}
