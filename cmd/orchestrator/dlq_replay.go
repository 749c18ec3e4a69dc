package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/nats-io/nuid"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/progress"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// dlqReplayCommand is "dlq replay": the calls republished with new ids;
// with --wait, their results waited for and printed.
func dlqReplayCommand() *cli.Command {
	var (
		f                 dlqFlags
		all, dryRun, wait bool
		rateFlag          string
		timeout           time.Duration
	)
	return &cli.Command{
		Name:         "replay",
		Args:         "(SEQ... | --all) [--tool T] [--reason R] [--rate N/s] [--timeout DUR] [--dry-run] [--wait]",
		Summary:      "republish the calls with new ids (<id>-r<SEQ>); each dead letter is\nremoved once its call is stored again",
		MaxArgs:      -1,
		Interspersed: true,
		Flags: func(fs *flag.FlagSet) {
			f.register(fs, true)
			fs.BoolVar(&all, "all", false, "replay every dead letter (that --tool and --reason select)")
			fs.StringVar(&rateFlag, "rate", "10/s", "at most this many calls per second (N/s, N/m, or N); 0 for no limit")
			fs.DurationVar(&timeout, "timeout", dlq.ReplayTimeoutDefault, "each replayed call's deadline, from when it is republished; with --wait, how long to wait for the results after the last one")
			fs.BoolVar(&dryRun, "dry-run", false, "say what would be replayed, change nothing")
			fs.BoolVar(&wait, "wait", false, "wait for each replayed call's result and print it; exit 1 if any failed")
		},
		Run: func(ctx context.Context, env *cli.Env, args []string) error {
			filter, seqs, err := f.selection(all, args)
			if err != nil {
				return err
			}
			rate, err := dlq.ParseRate(rateFlag)
			if err != nil {
				return cli.Usagef("--rate: %v", err)
			}
			if timeout <= 0 {
				return cli.Usagef("--timeout must be positive")
			}
			nc, j, s, err := f.connect(env)
			if err != nil {
				return err
			}
			defer nc.Close()
			if all {
				if seqs, err = s.Seqs(ctx, filter); err != nil {
					return err
				}
			}
			if len(seqs) == 0 {
				fmt.Fprintln(env.Stderr, "no dead letters to replay")
				return nil
			}

			cfg := dlq.ReplayConfig{Rate: rate, Timeout: timeout, DryRun: dryRun}
			var results *dlq.ReplayResults
			if wait && !dryRun {
				cfg.ReplyTo = "replay-" + nuid.Next()
				if results, err = dlq.WatchReplayResults(ctx, j, cfg.ReplyTo); err != nil {
					return cli.Unavailable(err)
				}
				defer results.Stop()
			}

			bar := progress.New(progress.Terminal(env.Stderr), progress.Config{Total: len(seqs), Unit: "letters"})
			bar.Start()
			skipped := 0
			replayed, err := s.Replay(ctx, seqs, cfg, func(r dlq.Replayed) {
				bar.Add(1)
				switch {
				case r.Err != nil && errors.Is(r.Err, dlq.ErrNotFound):
					skipped++
					bar.Printf(env.Stdout, "skipped  %d  gone: replayed or purged meanwhile\n", r.Seq)
				case r.Err != nil && errors.Is(r.Err, dlq.ErrNotReplayable):
					skipped++
					bar.Printf(env.Stdout, "skipped  %d  %s  %s: %v (dlq show %d; purge it)\n", r.Seq, r.Tool, r.Reason, r.Err, r.Seq)
				case r.Err != nil:
					bar.Printf(env.Stdout, "failed   %d  %s  %v\n", r.Seq, r.Tool, r.Err)
				case dryRun:
					bar.Printf(env.Stdout, "would replay  %d  %s  %s  %s -> %s\n", r.Seq, r.Tool, r.Reason, r.OriginalID, r.NewID)
				default:
					note := ""
					if r.Duplicate {
						note = "  (already republished by an earlier run)"
					}
					if results != nil {
						results.Expect(r)
					}
					bar.Printf(env.Stdout, "replayed  %d  %s  %s  %s -> %s%s\n", r.Seq, r.Tool, r.Reason, r.OriginalID, r.NewID, note)
				}
			})
			bar.Finish()
			if err != nil {
				return fmt.Errorf("stopped after %d: %w", replayed, err)
			}
			if dryRun {
				fmt.Fprintf(env.Stderr, "dry run: %d of %d dead letters would be replayed, nothing changed\n", len(seqs)-skipped, len(seqs))
				return nil
			}
			fmt.Fprintf(env.Stderr, "replayed %d of %d dead letters (%d skipped)\n", replayed, len(seqs), skipped)
			if results == nil {
				return nil
			}
			failed := results.Wait(ctx, timeout, func(r dlq.Replayed, res *envelope.Result) {
				switch {
				case res == nil:
					fmt.Fprintf(env.Stdout, "result   %d  %s  %s  none within %s\n", r.Seq, r.Tool, r.NewID, timeout)
				case res.IsError:
					fmt.Fprintf(env.Stdout, "result   %d  %s  %s  is_error %s %s: %s\n", r.Seq, r.Tool, r.NewID, res.Class, res.Code,
						ops.OneLine(res.Content.Text(), 160))
				default:
					fmt.Fprintf(env.Stdout, "result   %d  %s  %s  ok: %s\n", r.Seq, r.Tool, r.NewID, ops.OneLine(res.Content.Text(), 80))
				}
			})
			if failed > 0 {
				fmt.Fprintf(env.Stderr, "%d replayed calls did not succeed\n", failed)
				return cli.Exit(cli.ExitIsError)
			}
			return nil
		},
	}
}
