package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/cli"
)

const mcpHelp = `Serves the pool as an MCP server on stdin and stdout (the stdio transport),
for agent hosts that start a command (Claude Desktop, Claude Code, Cursor):
one line of a host's config gives it the whole pool.

With --nats-url (or NATS_URL) it serves the tools of that pool's live
catalog; with none it starts the pool in-process, as serve does: an embedded
JetStream server (on a free loopback port, its store in a temporary
directory unless --data-dir is given) and --workers in-process workers with
the built-in and demo tools. stdout carries the protocol only; logs go to
stderr. It ends when the host closes stdin.`

// mcpCommand is "orchestrator mcp": the pool's MCP server on stdio.
func mcpCommand() *cli.Command {
	f := &serveFlags{}
	return &cli.Command{
		Name:    "mcp",
		Summary: "the pool as an MCP server on stdio, for agent hosts that start a command",
		Help:    mcpHelp,
		Flags: func(fs *flag.FlagSet) {
			f.register(fs)
			oneOff(fs) // a host starts one per conversation
		},
		Run: func(ctx context.Context, env *cli.Env, _ []string) error {
			if err := f.check(env.Given); err != nil {
				return err
			}
			log, err := f.log.Logger(env.Stderr)
			if err != nil {
				return err
			}
			remove, err := f.useTempDataDir("toolpool-mcp-")
			if err != nil {
				return fmt.Errorf("orchestrator mcp: %w", err)
			}
			defer remove()
			var serveErr error
			f.ready = func(ctx context.Context, orch *toolpool.Orchestrator) {
				serveErr = orch.ServeMCPStdio(ctx, os.Stdin, env.Stdout)
			}
			if err := runServe(ctx, f, log); err != nil {
				log.Error("orchestrator mcp stopped", "err", err)
				return cli.Exit(cli.ExitIsError)
			}
			if serveErr != nil {
				log.Error("the MCP session failed", "err", serveErr)
				return cli.Exit(cli.ExitIsError)
			}
			return nil
		},
	}
}
