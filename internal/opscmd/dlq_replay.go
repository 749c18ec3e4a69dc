package opscmd

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

// dlqReplay is "dlq replay": the calls republished with new ids; with
// --wait, their results waited for and printed.
func dlqReplay() *cli.Command {
	r := &replayCmd{}
	return &cli.Command{
		Name:         "replay",
		Args:         "(SEQ... | --all) [--tool T] [--reason R] [--rate N/s] [--timeout DUR] [--dry-run] [--wait]",
		Summary:      "republish the calls with new ids (<id>-r<SEQ>); each dead letter is\nremoved once its call is stored again",
		MaxArgs:      -1,
		Interspersed: true,
		Flags:        r.register,
		Run:          r.run,
	}
}

// replayCmd is "dlq replay": its flags and its run.
type replayCmd struct {
	f                 dlqFlags
	all, dryRun, wait bool
	rate              string
	timeout           time.Duration
}

// register adds replay's flags to fs.
func (r *replayCmd) register(fs *flag.FlagSet) {
	r.f.register(fs, true)
	fs.BoolVar(&r.all, "all", false, "replay every dead letter (that --tool and --reason select)")
	fs.StringVar(&r.rate, "rate", "10/s", "at most this many calls per second (N/s, N/m, or N); 0 for no limit")
	fs.DurationVar(&r.timeout, "timeout", dlq.ReplayTimeoutDefault, "each replayed call's deadline, from when it is republished; with --wait, how long to wait for the results after the last one")
	fs.BoolVar(&r.dryRun, "dry-run", false, "say what would be replayed, change nothing")
	fs.BoolVar(&r.wait, "wait", false, "wait for each replayed call's result and print it; exit 1 if any failed")
}

// run replays the dead letters selected, then, with --wait, waits for
// their results.
func (r *replayCmd) run(ctx context.Context, env *cli.Env, args []string) error {
	filter, seqs, err := r.f.selection(r.all, args)
	if err != nil {
		return err
	}
	rate, err := dlq.ParseRate(r.rate)
	if err != nil {
		return cli.Usagef("--rate: %v", err)
	}
	if r.timeout <= 0 {
		return cli.Usagef("--timeout must be positive")
	}
	nc, j, s, err := r.f.connect(env)
	if err != nil {
		return err
	}
	defer nc.Close()
	if r.all {
		if seqs, err = s.Seqs(ctx, filter); err != nil {
			return err
		}
	}
	if len(seqs) == 0 {
		fmt.Fprintln(env.Stderr, "no dead letters to replay")
		return nil
	}

	cfg := dlq.ReplayConfig{Rate: rate, Timeout: r.timeout, DryRun: r.dryRun}
	if !r.dryRun {
		// A span per replay, linked to the dead letter's trace, when the
		// OTEL_* environment asks for traces: exported before exit.
		sd := &cli.Shutdown{Role: "dlq replay"}
		defer sd.Stop()
		tp, err := cli.Tracing(ctx, sd, "toolpool-orchestrator", nil)
		if err != nil {
			return err // a *cli.UsageError naming the variable
		}
		cfg.Tracer = tp.Tracer()
	}
	var results *dlq.ReplayResults
	if r.wait && !r.dryRun {
		cfg.ReplyTo = "replay-" + nuid.Next()
		if results, err = dlq.WatchReplayResults(ctx, j, cfg.ReplyTo); err != nil {
			return cli.Unavailable(err)
		}
		defer results.Stop()
	}

	replayed, skipped, err := r.replay(ctx, env, s, seqs, cfg, results)
	if err != nil {
		return fmt.Errorf("stopped after %d: %w", replayed, err)
	}
	if r.dryRun {
		fmt.Fprintf(env.Stderr, "dry run: %d of %d dead letters would be replayed, nothing changed\n", len(seqs)-skipped, len(seqs))
		return nil
	}
	fmt.Fprintf(env.Stderr, "replayed %d of %d dead letters (%d skipped)\n", replayed, len(seqs), skipped)
	if results == nil {
		return nil
	}
	return r.waitResults(ctx, env, results)
}

// replay republishes the calls of seqs, a line for each on stdout under a
// progress bar, and returns how many were replayed and skipped.
func (r *replayCmd) replay(ctx context.Context, env *cli.Env, s *dlq.Store, seqs []uint64, cfg dlq.ReplayConfig,
	results *dlq.ReplayResults) (replayed, skipped int, err error) {
	bar := progress.New(progress.Terminal(env.Stderr), progress.Config{Total: len(seqs), Unit: "letters"})
	bar.Start()
	defer bar.Finish()
	replayed, err = s.Replay(ctx, seqs, cfg, func(rp dlq.Replayed) {
		bar.Add(1)
		switch {
		case rp.Err != nil && errors.Is(rp.Err, dlq.ErrNotFound):
			skipped++
			bar.Printf(env.Stdout, "skipped  %d  gone: replayed or purged meanwhile\n", rp.Seq)
		case rp.Err != nil && errors.Is(rp.Err, dlq.ErrNotReplayable):
			skipped++
			bar.Printf(env.Stdout, "skipped  %d  %s  %s: %v (dlq show %d; purge it)\n", rp.Seq, rp.Tool, rp.Reason, rp.Err, rp.Seq)
		case rp.Err != nil:
			bar.Printf(env.Stdout, "failed   %d  %s  %v\n", rp.Seq, rp.Tool, rp.Err)
		case r.dryRun:
			bar.Printf(env.Stdout, "would replay  %d  %s  %s  %s -> %s\n", rp.Seq, rp.Tool, rp.Reason, rp.OriginalID, rp.NewID)
		default:
			note := ""
			if rp.Duplicate {
				note = "  (already republished by an earlier run)"
			}
			if results != nil {
				results.Expect(rp)
			}
			bar.Printf(env.Stdout, "replayed  %d  %s  %s  %s -> %s%s\n", rp.Seq, rp.Tool, rp.Reason, rp.OriginalID, rp.NewID, note)
		}
	})
	return replayed, skipped, err
}

// waitResults prints each replayed call's result, or that none came
// within --timeout; any that did not succeed exits 1.
func (r *replayCmd) waitResults(ctx context.Context, env *cli.Env, results *dlq.ReplayResults) error {
	failed := results.Wait(ctx, r.timeout, func(rp dlq.Replayed, res *envelope.Result) {
		switch {
		case res == nil:
			fmt.Fprintf(env.Stdout, "result   %d  %s  %s  none within %s\n", rp.Seq, rp.Tool, rp.NewID, r.timeout)
		case res.IsError:
			fmt.Fprintf(env.Stdout, "result   %d  %s  %s  is_error %s %s: %s\n", rp.Seq, rp.Tool, rp.NewID, res.Class, res.Code,
				ops.OneLine(res.Content.Text(), 160))
		default:
			fmt.Fprintf(env.Stdout, "result   %d  %s  %s  ok: %s\n", rp.Seq, rp.Tool, rp.NewID, ops.OneLine(res.Content.Text(), 80))
		}
	})
	if failed > 0 {
		fmt.Fprintf(env.Stderr, "%d replayed calls did not succeed\n", failed)
		return cli.Exit(cli.ExitIsError)
	}
	return nil
}
