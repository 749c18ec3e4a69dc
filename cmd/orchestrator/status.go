package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/pkg/ops"
)

// statusCmd prints, per tool, the calls pending, in flight and
// redelivered, the dead letters, whether the tool is paused, and its live
// workers. Exit 0, 1 when the state cannot be read, 2 on usage or
// connection errors.
func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newLiveCommand("status", "Per tool: calls pending (queued, not yet delivered), in flight (delivered, not yet\nacknowledged, retries waiting included), redelivered, dead-lettered, paused until,\nand live workers.", stderr)
	asJSON := c.fs.Bool("json", false, "print a JSON array")
	env, done, err := c.open(ctx, args)
	if err != nil {
		return exitCode(err)
	}
	defer done()
	ctx, j, live := env.ctx, env.js, env.live
	st, err := ops.Status(ctx, j, live)
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator status:", err)
		return cli.ExitIsError
	}
	if *asJSON {
		return writeIndented(stdout, stderr, st)
	}
	if len(st) == 0 {
		fmt.Fprintln(stderr, "no tools: no worker has served one yet")
		return cli.ExitOK
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tPENDING\tIN FLIGHT\tREDELIVERED\tDEAD-LETTERED\tPAUSED UNTIL\tLIVE WORKERS")
	for _, t := range st {
		paused := "-"
		if t.Paused(now) {
			paused = t.PausedUntil.Local().Format("15:04:05") + " (" + t.PausedUntil.Sub(now).Round(time.Second).String() + ")"
		}
		pending, inFlight, redelivered := "-", "-", "-"
		if t.Consumer {
			pending, inFlight, redelivered = strconv.FormatUint(t.Pending, 10), strconv.Itoa(t.InFlight), strconv.Itoa(t.Redelivered)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\n", t.Tool, pending, inFlight, redelivered, t.DeadLetters, paused, len(t.Workers))
	}
	_ = tw.Flush()
	return cli.ExitOK
}
