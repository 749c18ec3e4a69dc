package opscmd

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/fleet/dlq"
)

// dlqPurge is "dlq purge": the dead letters deleted for good, with
// --yes; without, what would be deleted.
func dlqPurge() *cli.Command {
	var (
		f        dlqFlags
		all, yes bool
	)
	return &cli.Command{
		Name:         "purge",
		Args:         "(SEQ... | --all) [--tool T] [--reason R] --yes",
		Summary:      "delete them for good; without --yes, says what it would delete",
		MaxArgs:      -1,
		Interspersed: true,
		Flags: func(fs *flag.FlagSet) {
			f.register(fs, true)
			fs.BoolVar(&all, "all", false, "delete every dead letter (that --tool and --reason select)")
			fs.BoolVar(&yes, "yes", false, "really delete them")
		},
		Run: func(ctx context.Context, env *cli.Env, args []string) error {
			filter, seqs, err := f.selection(all, args)
			if err != nil {
				return err
			}
			nc, _, s, err := f.connect(env)
			if err != nil {
				return err
			}
			defer nc.Close()

			// What would go: the letters themselves, so the operator sees them.
			var letters []*dlq.Letter
			if all {
				letters, err = s.List(ctx, filter)
			} else {
				var missing []uint64
				letters, missing, err = s.GetAll(ctx, seqs)
				for _, seq := range missing {
					fmt.Fprintf(env.Stderr, "no dead letter %d\n", seq)
				}
			}
			if err != nil {
				return err
			}
			if len(letters) == 0 {
				fmt.Fprintln(env.Stderr, "no dead letters to delete")
				return nil
			}
			if !yes {
				fmt.Fprintf(env.Stderr, "%s: would delete %d dead letters%s:\n", env.Path, len(letters), describeFilter(all, filter))
				for _, l := range letters {
					fmt.Fprintf(env.Stderr, "  %d  %s  %s  %s\n", l.Seq, l.Tool(), orDash(string(l.Reason())), callIDOf(l))
				}
				fmt.Fprintln(env.Stderr, "nothing was deleted; add --yes to delete them for good")
				return cli.Exit(cli.ExitUsage)
			}

			var deleted int
			if all {
				// Bounded to what was listed: nothing stored since goes.
				filter.UpTo = letters[len(letters)-1].Seq
				deleted, err = s.Purge(ctx, filter)
			} else {
				seqs = seqs[:0]
				for _, l := range letters {
					seqs = append(seqs, l.Seq)
				}
				deleted, err = s.DeleteSeqs(ctx, seqs)
			}
			if err != nil {
				return fmt.Errorf("deleted %d, then: %w", deleted, err)
			}
			fmt.Fprintf(env.Stdout, "deleted %d dead letters\n", deleted)
			return nil
		},
	}
}

func describeFilter(all bool, f dlq.Filter) string {
	if !all {
		return ""
	}
	var parts []string
	if f.Tool != "" {
		parts = append(parts, "tool "+f.Tool)
	}
	if f.Reason != "" {
		parts = append(parts, "reason "+string(f.Reason))
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
