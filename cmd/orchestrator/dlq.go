package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/dlq"
	"github.com/toolpool/toolpool/pkg/envelope"
)

const dlqUsage = `usage: orchestrator dlq COMMAND [flags]

Operates the dead letters in TOOL_DLQ: calls set aside because their
retries ran out (exhausted), they could not be decoded (malformed), they
kept killing workers (poison) or their deadline passed in the queue
(expired).

commands:
  ls      [--tool T] [--reason R] [--since DUR] [--json]
          list them: sequence, tool, reason, attempts, age, last error
  show    [--json] SEQ
          one dead letter: the call envelope and every attempt
  replay  (SEQ... | --all) [--tool T] [--reason R] [--rate N/s] [--timeout DUR] [--dry-run] [--wait]
          republish the calls with new ids (<id>-r<SEQ>); each dead letter is
          removed once its call is stored again
  purge   (SEQ... | --all) [--tool T] [--reason R] --yes
          delete them for good; without --yes, says what it would delete

Every command takes --nats-url (env NATS_URL) and the credential flags.
`

// dlqCmd dispatches the dlq subcommands. Exit 0 on success, 1 when a
// command failed (or a replayed call failed with --wait), 2 on usage or
// connection errors.
func dlqCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, dlqUsage)
		if len(args) == 0 {
			return cli.ExitUsage
		}
		return cli.ExitOK
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "ls", "list":
		return dlqList(ctx, args, stdout, stderr)
	case "show":
		return dlqShow(ctx, args, stdout, stderr)
	case "replay":
		return dlqReplay(ctx, args, stdout, stderr)
	case "purge":
		return dlqPurge(ctx, args, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "orchestrator dlq: unknown command %q\n\n%s", sub, dlqUsage)
		return cli.ExitUsage
	}
}

// dlqFlags are the flags the dlq subcommands share.
type dlqFlags struct {
	fs      *flag.FlagSet
	nats    cli.NATSFlags
	timeout time.Duration
	tool    string
	reason  string
}

func newDLQFlags(name, usage string, stderr io.Writer, filters bool) *dlqFlags {
	f := &dlqFlags{fs: flag.NewFlagSet("orchestrator dlq "+name, flag.ContinueOnError)}
	f.fs.SetOutput(stderr)
	f.fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: orchestrator dlq %s\n\nflags:\n", usage)
		f.fs.PrintDefaults()
	}
	f.nats.Register(f.fs)
	if filters {
		f.fs.StringVar(&f.tool, "tool", "", "only the dead letters of this tool")
		f.fs.StringVar(&f.reason, "reason", "", "only the dead letters with this reason: "+classify.DeadLetterReasonList())
	}
	return f
}

// parse parses args, flags and positional arguments in any order, and
// returns the positional ones. A non-nil code means: exit with it.
func (f *dlqFlags) parse(args []string, stderr io.Writer) ([]string, *int) {
	var pos []string
	for {
		if err := f.fs.Parse(args); err != nil {
			code := cli.ExitUsage
			if errors.Is(err, flag.ErrHelp) {
				code = cli.ExitOK
			}
			return nil, &code
		}
		args = f.fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if _, err := classify.ParseDeadLetterReason(f.reason); err != nil {
		fmt.Fprintf(stderr, "%s: --reason %q: want %s\n", f.fs.Name(), f.reason, classify.DeadLetterReasonList())
		code := cli.ExitUsage
		return nil, &code
	}
	return pos, nil
}

// filter is the Filter of --tool and --reason.
func (f *dlqFlags) filter() dlq.Filter {
	return dlq.Filter{Tool: f.tool, Reason: dlq.Reason(f.reason)}
}

// connect connects and binds to TOOL_DLQ.
func (f *dlqFlags) connect(stderr io.Writer) (*nats.Conn, js.JetStream, *dlq.Store, error) {
	nc, j, err := f.nats.ConnectJetStream("toolpool-dlq", cli.WarnLogger(stderr))
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := dlq.NewStore(ctx, j)
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	return nc, j, s, nil
}

// parseSeqs reads dead-letter sequences.
func parseSeqs(name string, args []string, stderr io.Writer) ([]uint64, bool) {
	seqs := make([]uint64, 0, len(args))
	for _, a := range args {
		seq, err := strconv.ParseUint(a, 10, 64)
		if err != nil || seq == 0 {
			fmt.Fprintf(stderr, "orchestrator dlq %s: %q is not a dead letter's sequence (a positive number, as dlq ls shows)\n", name, a)
			return nil, false
		}
		seqs = append(seqs, seq)
	}
	return seqs, true
}

// letterJSON is a dead letter as the --json outputs print it.
type letterJSON struct {
	Seq     uint64     `json:"seq"`
	Subject string     `json:"subject"`
	Stored  time.Time  `json:"stored"`
	Tool    string     `json:"tool"`
	Reason  dlq.Reason `json:"reason"`
	Entry   *dlq.Entry `json:"entry,omitempty"`
	Error   string     `json:"decode_error,omitempty"`
}

func toJSON(l *dlq.Letter) letterJSON {
	out := letterJSON{Seq: l.Seq, Subject: l.Subject, Stored: l.Stored, Tool: l.Tool(), Reason: l.Reason(), Entry: l.Entry}
	if l.Err != nil {
		out.Error = l.Err.Error()
	}
	return out
}

// dlqList is "dlq ls".
func dlqList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newDLQFlags("ls", "ls [--tool T] [--reason R] [--since DUR] [--json]", stderr, true)
	since := f.fs.Duration("since", 0, "only the dead letters stored within this long (e.g. 1h)")
	asJSON := f.fs.Bool("json", false, "print a JSON array")
	pos, code := f.parse(args, stderr)
	if code != nil {
		return *code
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "orchestrator dlq ls: unexpected argument %q\n", pos[0])
		return cli.ExitUsage
	}
	if *since < 0 {
		fmt.Fprintln(stderr, "orchestrator dlq ls: --since must not be negative")
		return cli.ExitUsage
	}
	nc, _, s, err := f.connect(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator dlq ls:", err)
		return cli.ExitUsage
	}
	defer nc.Close()
	filter := f.filter()
	now := time.Now()
	if *since > 0 {
		filter.Since = now.Add(-*since)
	}
	letters, err := s.List(ctx, filter)
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator dlq ls:", err)
		return cli.ExitIsError
	}
	if *asJSON {
		out := make([]letterJSON, 0, len(letters))
		for _, l := range letters {
			out = append(out, toJSON(l))
		}
		return writeIndented(stdout, stderr, out)
	}
	if len(letters) == 0 {
		fmt.Fprintln(stderr, "no dead letters")
		return cli.ExitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTOOL\tREASON\tATTEMPTS\tAGE\tLAST ERROR")
	for _, l := range letters {
		attempts, lastErr := "-", ""
		if e := l.Entry; e != nil {
			if n := e.AttemptCount(); n > 0 {
				attempts = strconv.Itoa(n)
			}
			lastErr = e.Error
			if n := len(e.Attempts); n > 0 && e.Attempts[n-1].Code != "" {
				lastErr = e.Attempts[n-1].Code + ": " + lastErr
			}
		} else if l.Err != nil {
			lastErr = "(unreadable entry: " + l.Err.Error() + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", l.Seq, l.Tool(), orDash(string(l.Reason())), attempts,
			age(now.Sub(l.Stored)), oneLine(lastErr, 80))
	}
	_ = tw.Flush()
	return cli.ExitOK
}

// dlqShow is "dlq show SEQ".
func dlqShow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newDLQFlags("show", "show [--json] SEQ", stderr, false)
	asJSON := f.fs.Bool("json", false, "print the dead letter as JSON")
	pos, code := f.parse(args, stderr)
	if code != nil {
		return *code
	}
	if len(pos) != 1 {
		f.fs.Usage()
		return cli.ExitUsage
	}
	seqs, ok := parseSeqs("show", pos, stderr)
	if !ok {
		return cli.ExitUsage
	}
	nc, _, s, err := f.connect(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator dlq show:", err)
		return cli.ExitUsage
	}
	defer nc.Close()
	l, err := s.Get(ctx, seqs[0])
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator dlq show:", err)
		return cli.ExitIsError
	}
	if *asJSON {
		return writeIndented(stdout, stderr, toJSON(l))
	}
	writeLetter(stdout, l, time.Now())
	return cli.ExitOK
}

// writeLetter prints a dead letter for a person.
func writeLetter(w io.Writer, l *dlq.Letter, now time.Time) {
	fmt.Fprintf(w, "dead letter %d (%s), stored %s (%s ago)\n\n", l.Seq, l.Subject,
		l.Stored.Local().Format(time.RFC3339), age(now.Sub(l.Stored)))
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
	row("error:", oneLine(e.Error, 400))
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
		fmt.Fprintf(w, "  (not JSON, %d bytes) %q\n", len(e.RawCall), oneLine(string(e.RawCall), 200))
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
			shortDuration(a.Duration), orDash(a.WorkerID), orDash(string(a.Class)), orDash(a.Code), oneLine(a.Message, 120))
	}
	_ = tw.Flush()
}

// dlqReplay is "dlq replay".
func dlqReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newDLQFlags("replay", "replay (SEQ... | --all) [--tool T] [--reason R] [--rate N/s] [--timeout DUR] [--dry-run] [--wait]", stderr, true)
	all := f.fs.Bool("all", false, "replay every dead letter (that --tool and --reason select)")
	rateFlag := f.fs.String("rate", "10/s", "at most this many calls per second (N/s, N/m, or N); 0 for no limit")
	f.fs.DurationVar(&f.timeout, "timeout", dlq.ReplayTimeoutDefault, "each replayed call's deadline, from when it is republished; with --wait, how long to wait for the results after the last one")
	dryRun := f.fs.Bool("dry-run", false, "say what would be replayed, change nothing")
	wait := f.fs.Bool("wait", false, "wait for each replayed call's result and print it; exit 1 if any failed")
	pos, code := f.parse(args, stderr)
	if code != nil {
		return *code
	}
	if *all == (len(pos) > 0) {
		fmt.Fprintln(stderr, "orchestrator dlq replay: give the dead letters' sequences, or --all")
		return cli.ExitUsage
	}
	if len(pos) > 0 && (f.tool != "" || f.reason != "") {
		fmt.Fprintln(stderr, "orchestrator dlq replay: --tool and --reason go with --all, not with sequences")
		return cli.ExitUsage
	}
	rate, err := parseRate(*rateFlag)
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator dlq replay: --rate:", err)
		return cli.ExitUsage
	}
	if f.timeout <= 0 {
		fmt.Fprintln(stderr, "orchestrator dlq replay: --timeout must be positive")
		return cli.ExitUsage
	}
	seqs, ok := parseSeqs("replay", pos, stderr)
	if !ok {
		return cli.ExitUsage
	}
	nc, j, s, err := f.connect(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator dlq replay:", err)
		return cli.ExitUsage
	}
	defer nc.Close()
	if *all {
		if err := s.Scan(ctx, f.filter(), func(l *dlq.Letter) error {
			seqs = append(seqs, l.Seq)
			return nil
		}); err != nil {
			fmt.Fprintln(stderr, "orchestrator dlq replay:", err)
			return cli.ExitIsError
		}
	}
	if len(seqs) == 0 {
		fmt.Fprintln(stderr, "no dead letters to replay")
		return cli.ExitOK
	}

	cfg := dlq.ReplayConfig{Rate: rate, Timeout: f.timeout, DryRun: *dryRun}
	var results *resultWaiter
	if *wait && !*dryRun {
		cfg.ReplyTo = "replay-" + nuid.Next()
		if results, err = startResultWaiter(ctx, j, cfg.ReplyTo); err != nil {
			fmt.Fprintln(stderr, "orchestrator dlq replay:", err)
			return cli.ExitUsage
		}
		defer results.stop()
	}

	bar := newProgress(stderr, len(seqs))
	out := &lockedWriter{w: stdout, bar: bar}
	skipped, dups := 0, 0
	replayed, err := s.Replay(ctx, seqs, cfg, func(r dlq.Replayed) {
		bar.step()
		switch {
		case r.Err != nil && errors.Is(r.Err, dlq.ErrNotFound):
			skipped++
			out.printf("skipped  %d  gone: replayed or purged meanwhile\n", r.Seq)
		case r.Err != nil && errors.Is(r.Err, dlq.ErrNotReplayable):
			skipped++
			out.printf("skipped  %d  %s  %s: %v (dlq show %d; purge it)\n", r.Seq, r.Tool, r.Reason, r.Err, r.Seq)
		case r.Err != nil:
			out.printf("failed   %d  %s  %v\n", r.Seq, r.Tool, r.Err)
		case *dryRun:
			out.printf("would replay  %d  %s  %s  %s -> %s\n", r.Seq, r.Tool, r.Reason, r.OriginalID, r.NewID)
		default:
			note := ""
			if r.Duplicate {
				dups++
				note = "  (already republished by an earlier run)"
			}
			if results != nil {
				results.expect(r)
			}
			out.printf("replayed  %d  %s  %s  %s -> %s%s\n", r.Seq, r.Tool, r.Reason, r.OriginalID, r.NewID, note)
		}
	})
	bar.done()
	if err != nil {
		fmt.Fprintf(stderr, "orchestrator dlq replay: stopped after %d: %v\n", replayed, err)
		return cli.ExitIsError
	}
	if *dryRun {
		fmt.Fprintf(stderr, "dry run: %d of %d dead letters would be replayed, nothing changed\n", len(seqs)-skipped, len(seqs))
		return cli.ExitOK
	}
	fmt.Fprintf(stderr, "replayed %d of %d dead letters (%d skipped)\n", replayed, len(seqs), skipped)
	if results == nil {
		return cli.ExitOK
	}
	failed := results.wait(ctx, f.timeout, out)
	if failed > 0 {
		fmt.Fprintf(stderr, "%d replayed calls did not succeed\n", failed)
		return cli.ExitIsError
	}
	return cli.ExitOK
}

// dlqPurge is "dlq purge".
func dlqPurge(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newDLQFlags("purge", "purge (SEQ... | --all) [--tool T] [--reason R] --yes", stderr, true)
	all := f.fs.Bool("all", false, "delete every dead letter (that --tool and --reason select)")
	yes := f.fs.Bool("yes", false, "really delete them")
	pos, code := f.parse(args, stderr)
	if code != nil {
		return *code
	}
	if *all == (len(pos) > 0) {
		fmt.Fprintln(stderr, "orchestrator dlq purge: give the dead letters' sequences, or --all")
		return cli.ExitUsage
	}
	if len(pos) > 0 && (f.tool != "" || f.reason != "") {
		fmt.Fprintln(stderr, "orchestrator dlq purge: --tool and --reason go with --all, not with sequences")
		return cli.ExitUsage
	}
	seqs, ok := parseSeqs("purge", pos, stderr)
	if !ok {
		return cli.ExitUsage
	}
	nc, _, s, err := f.connect(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator dlq purge:", err)
		return cli.ExitUsage
	}
	defer nc.Close()

	// What would go: the letters themselves, so the operator sees them.
	var letters []*dlq.Letter
	if *all {
		if letters, err = s.List(ctx, f.filter()); err != nil {
			fmt.Fprintln(stderr, "orchestrator dlq purge:", err)
			return cli.ExitIsError
		}
	} else {
		for _, seq := range seqs {
			l, err := s.Get(ctx, seq)
			if errors.Is(err, dlq.ErrNotFound) {
				fmt.Fprintf(stderr, "no dead letter %d\n", seq)
				continue
			}
			if err != nil {
				fmt.Fprintln(stderr, "orchestrator dlq purge:", err)
				return cli.ExitIsError
			}
			letters = append(letters, l)
		}
	}
	if len(letters) == 0 {
		fmt.Fprintln(stderr, "no dead letters to delete")
		return cli.ExitOK
	}
	if !*yes {
		fmt.Fprintf(stderr, "orchestrator dlq purge: would delete %d dead letters%s:\n", len(letters), describeFilter(*all, f))
		for _, l := range letters {
			fmt.Fprintf(stderr, "  %d  %s  %s  %s\n", l.Seq, l.Tool(), orDash(string(l.Reason())), callIDOf(l))
		}
		fmt.Fprintln(stderr, "nothing was deleted; add --yes to delete them for good")
		return cli.ExitUsage
	}

	deleted := 0
	if *all && f.reason == "" {
		// One request on the server, bounded to what was listed.
		n, err := s.Purge(ctx, dlq.Filter{Tool: f.tool, UpTo: letters[len(letters)-1].Seq})
		if err != nil {
			fmt.Fprintln(stderr, "orchestrator dlq purge:", err)
			return cli.ExitIsError
		}
		deleted = n
	} else {
		for _, l := range letters {
			err := s.Delete(ctx, l.Seq)
			if errors.Is(err, dlq.ErrNotFound) {
				continue
			}
			if err != nil {
				fmt.Fprintf(stderr, "orchestrator dlq purge: deleted %d, then: %v\n", deleted, err)
				return cli.ExitIsError
			}
			deleted++
		}
	}
	fmt.Fprintf(stdout, "deleted %d dead letters\n", deleted)
	return cli.ExitOK
}

func describeFilter(all bool, f *dlqFlags) string {
	if !all {
		return ""
	}
	var parts []string
	if f.tool != "" {
		parts = append(parts, "tool "+f.tool)
	}
	if f.reason != "" {
		parts = append(parts, "reason "+f.reason)
	}
	if len(parts) == 0 {
		return " (all of them)"
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func callIDOf(l *dlq.Letter) string {
	if l.Entry != nil && l.Entry.CallID != "" {
		return l.Entry.CallID
	}
	return "-"
}

// parseRate reads "N/s", "N/m", "N/min" or "N" (per second); 0 is no limit.
func parseRate(s string) (float64, error) {
	num, unit, _ := strings.Cut(strings.TrimSpace(s), "/")
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 || n != n {
		return 0, fmt.Errorf("%q: want a rate such as 5/s, 100/m or 0 (no limit)", s)
	}
	switch unit {
	case "", "s", "sec":
		return n, nil
	case "m", "min":
		return n / 60, nil
	}
	return 0, fmt.Errorf("%q: the unit must be /s or /m", s)
}

// age writes a duration the way ls shows ages: 45s, 12m, 3h, 5d.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(max(d, 0)/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	default:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
}

// shortDuration rounds d to three significant places or so: 1.234s,
// 12ms, 85µs.
func shortDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps s on one line and at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}

func writeIndented(stdout, stderr io.Writer, v any) int {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator dlq:", err)
		return cli.ExitIsError
	}
	fmt.Fprintln(stdout, string(out))
	return cli.ExitOK
}

// resultWaiter collects the results of replayed calls from
// tools.result.<instance>.
type resultWaiter struct {
	j    js.JetStream
	name string
	cc   js.ConsumeContext

	mu       sync.Mutex
	expected map[string]dlq.Replayed // by new call id, not yet answered
	got      map[string]*envelope.Result
	arrived  chan struct{} // signalled on each result
}

// startResultWaiter starts consuming the instance's results, from the end
// of TOOL_RESULTS, before any call is republished.
func startResultWaiter(ctx context.Context, j js.JetStream, instance string) (*resultWaiter, error) {
	s, err := j.Stream(ctx, jetstream.StreamResults)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", jetstream.StreamResults, err)
	}
	w := &resultWaiter{
		j: j, name: "replay_" + instance,
		expected: map[string]dlq.Replayed{}, got: map[string]*envelope.Result{}, arrived: make(chan struct{}, 1),
	}
	cons, err := j.CreateConsumer(ctx, jetstream.StreamResults,
		jetstream.ResultConsumerConfig(w.name, instance, s.CachedInfo().State.LastSeq+1))
	if err != nil {
		return nil, fmt.Errorf("result consumer: %w", err)
	}
	w.cc, err = cons.Consume(func(m js.Msg) {
		res, err := envelope.DecodeResult(m.Data())
		if err != nil {
			return
		}
		w.mu.Lock()
		if _, dup := w.got[res.CallID]; !dup {
			w.got[res.CallID] = res
		}
		w.mu.Unlock()
		select {
		case w.arrived <- struct{}{}:
		default:
		}
	})
	if err != nil {
		w.deleteConsumer()
		return nil, fmt.Errorf("consume results: %w", err)
	}
	return w, nil
}

// deleteConsumer deletes the waiter's consumer rather than leaving it to
// its inactivity threshold; best effort.
func (w *resultWaiter) deleteConsumer() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = w.j.DeleteConsumer(ctx, jetstream.StreamResults, w.name)
}

func (w *resultWaiter) expect(r dlq.Replayed) {
	w.mu.Lock()
	w.expected[r.NewID] = r
	w.mu.Unlock()
}

func (w *resultWaiter) stop() {
	w.cc.Stop()
	w.deleteConsumer()
}

// wait prints each expected result as it arrives, until all are in or
// timeout passes without one; it returns how many did not succeed.
func (w *resultWaiter) wait(ctx context.Context, timeout time.Duration, out *lockedWriter) int {
	failed := 0
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		w.mu.Lock()
		var ready []*envelope.Result
		for id := range w.expected {
			if res, ok := w.got[id]; ok {
				ready = append(ready, res)
			}
		}
		slices.SortFunc(ready, func(a, b *envelope.Result) int { return strings.Compare(a.CallID, b.CallID) })
		for _, res := range ready {
			r := w.expected[res.CallID]
			delete(w.expected, res.CallID)
			if res.IsError {
				failed++
				out.printf("result   %d  %s  %s  is_error %s %s: %s\n", r.Seq, r.Tool, r.NewID, res.Class, res.Code,
					oneLine(res.Content.Text(), 160))
			} else {
				out.printf("result   %d  %s  %s  ok: %s\n", r.Seq, r.Tool, r.NewID, oneLine(res.Content.Text(), 80))
			}
		}
		left := len(w.expected)
		w.mu.Unlock()
		if left == 0 {
			return failed
		}
		select {
		case <-w.arrived:
		case <-t.C:
			w.mu.Lock()
			defer w.mu.Unlock()
			for id, r := range w.expected {
				failed++
				out.printf("result   %d  %s  %s  none within %s\n", r.Seq, r.Tool, id, timeout)
			}
			return failed
		case <-ctx.Done():
			return failed + left
		}
	}
}

// lockedWriter writes lines to the output, clearing and redrawing the
// progress bar around them.
type lockedWriter struct {
	mu  sync.Mutex
	w   io.Writer
	bar *progress
}

func (l *lockedWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bar.clear()
	fmt.Fprintf(l.w, format, args...)
	l.bar.draw()
}

// progress is a one-line progress bar on stderr, drawn only when stderr is
// a terminal.
type progress struct {
	w          io.Writer
	on         bool
	total, now int
	start      time.Time
}

func newProgress(stderr io.Writer, total int) *progress {
	return &progress{w: stderr, on: isTerminal(stderr), total: total, start: time.Now()}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *progress) step() { p.now++ }

func (p *progress) clear() {
	if p.on {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func (p *progress) draw() {
	if !p.on || p.total == 0 {
		return
	}
	const width = 30
	filled := width * p.now / p.total
	eta := ""
	if p.now > 0 && p.now < p.total {
		left := time.Duration(float64(time.Since(p.start)) / float64(p.now) * float64(p.total-p.now))
		eta = " eta " + left.Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d%s", strings.Repeat("#", filled), strings.Repeat(".", width-filled), p.now, p.total, eta)
}

func (p *progress) done() {
	if p.on {
		p.draw()
		fmt.Fprintln(p.w)
	}
}
