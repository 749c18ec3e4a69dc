// Command orchestrator runs toolpool: with no arguments (or "serve") an
// embedded JetStream server, a worker pool and the HTTP API; "call" sends one
// tool call through the pool; "orchestrator -h" lists the other commands.
//
//	orchestrator [serve] [flags]
//	orchestrator call [--nats-url URL] [--session ID] [--timeout DUR] TOOL 'JSON'
//
// Every command is an internal/cli.Command: the tree is in commands below,
// each command's flags and run in its own file.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/opscmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command args name and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Main(ctx, orchestratorCommand(), args, stdout, stderr)
}

// orchestratorCommand is the orchestrator's command tree.
func orchestratorCommand() *cli.Command {
	return &cli.Command{
		Name:    "orchestrator",
		Args:    "[command] [flags]",
		Default: "serve",
		Commands: []*cli.Command{
			serveCommand(),
			callCommand(),
			opscmd.Run(&servePool{}),
			toolsCommand(),
			opscmd.DLQ(),
			opscmd.Approvals(),
			opscmd.Status(),
			opscmd.Budgets(),
			opscmd.Bench(),
			mcpCommand(),
		},
	}
}
