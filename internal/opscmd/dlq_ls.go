package opscmd

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/fleet/ops"
)

// dlqLs is "dlq ls": the dead letters, one a line.
func dlqLs() *cli.Command {
	var (
		f      dlqFlags
		since  time.Duration
		asJSON bool
	)
	return &cli.Command{
		Name:         "ls",
		Aliases:      []string{"list"},
		Args:         "[--tool T] [--reason R] [--since DUR] [--json]",
		Summary:      "list them: sequence, tool, reason, attempts, age, last error",
		Interspersed: true,
		Flags: func(fs *flag.FlagSet) {
			f.register(fs, true)
			fs.DurationVar(&since, "since", 0, "only the dead letters stored within this long (e.g. 1h)")
			fs.BoolVar(&asJSON, "json", false, "print a JSON array")
		},
		Run: func(ctx context.Context, env *cli.Env, _ []string) error {
			filter, err := f.filter()
			if err != nil {
				return err
			}
			if since < 0 {
				return cli.Usagef("--since must not be negative")
			}
			nc, _, s, err := f.connect(env)
			if err != nil {
				return err
			}
			defer nc.Close()
			now := time.Now()
			if since > 0 {
				filter.Since = now.Add(-since)
			}
			letters, err := s.List(ctx, filter)
			if err != nil {
				return err
			}
			if asJSON {
				out := make([]letterJSON, 0, len(letters))
				for _, l := range letters {
					out = append(out, toJSON(l))
				}
				return cli.WriteJSON(env.Stdout, out)
			}
			if len(letters) == 0 {
				fmt.Fprintln(env.Stderr, "no dead letters")
				return nil
			}
			writeLetters(env, letters, now)
			return nil
		},
	}
}

// writeLetters prints the ls table.
func writeLetters(env *cli.Env, letters []*dlq.Letter, now time.Time) {
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
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
			ops.Age(now.Sub(l.Stored)), ops.OneLine(lastErr, 80))
	}
	_ = tw.Flush()
}
