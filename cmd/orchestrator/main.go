// Command orchestrator runs toolpool: with no arguments (or "serve") an
// embedded JetStream server, a worker pool and the HTTP API; "call" sends one
// tool call through the pool.
//
//	orchestrator [serve] [flags]
//	orchestrator call [--nats-url URL] [--session ID] [--timeout DUR] TOOL 'JSON'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/toolpool/toolpool/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: orchestrator [command] [flags]

commands:
  serve   (the default) run the pool: an embedded JetStream server unless
          --nats-url is given, in-process workers, and the HTTP API
  call    send one tool call through the pool and print its tool_result:
          orchestrator call [--nats-url URL] [--session ID] [--timeout DUR] TOOL 'JSON'
  run     an agent loop on the Anthropic Messages API, its tool calls run on the pool:
          orchestrator run --task "…" [--model M] [--max-iterations N] [--api URL | --nats-url URL]
  tools   print the live tool definitions (Anthropic tools format); --workers adds who serves each
  dlq     operate the dead letters: dlq ls|show|replay|purge (orchestrator dlq -h)
  status  per tool: pending, in flight, redelivered, dead-lettered, paused until, live workers
  bench   load the whole path, with a raw-JetStream baseline in the same run: orchestrator bench --calls 50000

Run "orchestrator COMMAND -h" (or "orchestrator help COMMAND") for a command's flags.
`

// printHelp writes the commands, then serve's flags (serve is what runs
// when no command is given).
func printHelp(w io.Writer) {
	fmt.Fprint(w, usage)
	var fs *flag.FlagSet
	if _, err := parsePoolFlags("orchestrator serve", nil, io.Discard, func(s *flag.FlagSet) { fs = s }); err != nil || fs == nil {
		return
	}
	fmt.Fprint(w, "\nserve's flags (orchestrator [serve] [flags]):\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd, explicit := "serve", false
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args, explicit = args[0], args[1:], true
	}
	switch cmd {
	case "serve":
		if !explicit {
			// "orchestrator -h" (or --help) asks about the binary, not only
			// serve: the commands, then serve's flags.
			if _, err := parsePoolFlags("orchestrator", args, io.Discard, nil); errors.Is(err, flag.ErrHelp) {
				printHelp(stderr)
				return cli.ExitOK
			}
		}
		return serve(ctx, args, stderr)
	case "call":
		return call(ctx, args, stdout, stderr)
	case "run":
		return runCmd(ctx, args, stdout, stderr)
	case "tools":
		return toolsCmd(ctx, args, stdout, stderr)
	case "dlq":
		return dlqCmd(ctx, args, stdout, stderr)
	case "status":
		return statusCmd(ctx, args, stdout, stderr)
	case "bench":
		return benchCmd(ctx, args, stdout, stderr)
	case "help":
		if len(args) > 0 && args[0] != "help" { // orchestrator help COMMAND
			return run(ctx, []string{args[0], "-h"}, stdout, stderr)
		}
		printHelp(stdout)
		return cli.ExitOK
	default:
		fmt.Fprintf(stderr, "orchestrator: unknown command %q\n\n%s", cmd, usage)
		return cli.ExitUsage
	}
}
