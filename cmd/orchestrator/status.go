package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/pkg/discovery"
	"github.com/toolpool/toolpool/pkg/ops"
)

// statusCmd prints, per tool, the calls pending, in flight and
// redelivered, the dead letters, whether the tool is paused, and its live
// workers. Exit 0, 1 when the state cannot be read, 2 on usage or
// connection errors.
func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("orchestrator status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: orchestrator status [flags]\n\nPer tool: calls pending (queued, not yet delivered), in flight (delivered, not yet\nacknowledged, retries waiting included), redelivered, dead-lettered, paused until,\nand live workers.\n\nflags:")
		fs.PrintDefaults()
	}
	var natsFlags cli.NATSFlags
	natsFlags.Register(fs)
	asJSON := fs.Bool("json", false, "print a JSON array")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the server")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "orchestrator status: unexpected argument %q\n", fs.Arg(0))
		return cli.ExitUsage
	}
	if *timeout <= 0 {
		fmt.Fprintln(stderr, "orchestrator status: --timeout must be positive")
		return cli.ExitUsage
	}
	log := cli.WarnLogger(stderr)
	nc, j, err := natsFlags.ConnectJetStream("toolpool-status", log)
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator status:", err)
		return cli.ExitUsage
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	live, err := discovery.NewCatalog(ctx, discovery.CatalogConfig{JetStream: j, Logger: log})
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator status:", err)
		return cli.ExitUsage
	}
	defer live.Close()
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
