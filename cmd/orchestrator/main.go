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
	"flag"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolpool/toolpool/internal/cli"
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
			poolCommand("run", "an agent loop on the Anthropic Messages API, its tool calls run on the pool",
				`--task "…" [--model M] [--max-iterations N] [--api URL | --nats-url URL]`, runCmd),
			toolsCommand(),
			dlqCommand(),
			statusCommand(),
			benchCommand(),
		},
	}
}

// serveCommand is "orchestrator serve", the default command.
func serveCommand() *cli.Command {
	c := poolCommand("serve", "(the default) run the pool: an embedded JetStream server unless\n--nats-url is given, in-process workers, and the HTTP API", "",
		func(ctx context.Context, args []string, _, stderr io.Writer) int { return serve(ctx, args, stderr) })
	// The flags, for "orchestrator -h".
	c.Flags = func(fs *flag.FlagSet) {
		var src *flag.FlagSet
		if _, err := parsePoolFlags("orchestrator serve", nil, io.Discard, func(s *flag.FlagSet) { src = s }); err != nil || src == nil {
			return
		}
		src.VisitAll(func(f *flag.Flag) {
			fs.Var(f.Value, f.Name, f.Usage)
			fs.Lookup(f.Name).DefValue = f.DefValue // not what parsing set
		})
	}
	return c
}

// poolCommand adapts a command that parses its own flags (serve, run:
// their flags are the pool's, parsePoolFlags) to a cli.Command.
func poolCommand(name, summary, args string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) *cli.Command {
	return &cli.Command{
		Name: name, Summary: summary, Args: args, Raw: true,
		Run: func(ctx context.Context, env *cli.Env, args []string) error {
			return cli.Exit(run(ctx, args, env.Stdout, env.Stderr))
		},
	}
}
