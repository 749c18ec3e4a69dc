package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/pkg/ops"
)

// callCommand is "orchestrator call": one tool call through the pool, its
// tool_result block printed. Exit 0 on success, 1 when the result is an
// error, 2 on usage or connection errors.
func callCommand() *cli.Command {
	var (
		natsFlags cli.NATSFlags
		session   string
		timeout   time.Duration
	)
	return &cli.Command{
		Name:    "call",
		Args:    "[flags] TOOL 'JSON'",
		Summary: "send one tool call through the pool and print its tool_result",
		Help:    "Sends one tool call through the pool and prints its tool_result block.\nExit 0 on success, 1 when the result is an error, 2 on usage or connection errors.",
		MinArgs: 1, MaxArgs: 2,
		Flags: func(fs *flag.FlagSet) {
			natsFlags.Register(fs)
			fs.StringVar(&session, "session", "", "agent session id (scopes the repeated-failure advice)")
			fs.DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the result")
		},
		Run: func(ctx context.Context, env *cli.Env, args []string) error {
			tool, input := args[0], "{}"
			if len(args) == 2 {
				input = args[1]
			}
			if !json.Valid([]byte(input)) {
				return cli.Usagef("the input %q is not valid JSON; give a JSON object such as '{\"text\":\"hi\"}'", input)
			}
			if timeout <= 0 {
				return cli.Usagef("--timeout must be positive")
			}
			log := cli.WarnLogger(env.Stderr)
			nc, j, err := natsFlags.ConnectJetStream("toolpool-call", log)
			if err != nil {
				return cli.Unavailable(err)
			}
			defer nc.Close()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			block, err := ops.Call(ctx, ops.CallConfig{JetStream: j, Logger: log, Session: session}, tool, json.RawMessage(input))
			if err != nil {
				return cli.Unavailable(err)
			}
			out, err := json.MarshalIndent(block, "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Stdout, string(out))
			if block.IsError {
				return cli.Exit(cli.ExitIsError)
			}
			return nil
		},
	}
}
