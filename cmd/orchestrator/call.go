package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/cli"
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
			sd := &cli.Shutdown{Role: "call", Logger: log}
			defer sd.Stop() // exports the call's spans, when tracing is on
			tp, err := cli.Tracing(ctx, sd, "toolpool-orchestrator", nil)
			if err != nil {
				return err // a *cli.UsageError naming the variable
			}
			nc, err := natsFlags.Connect("", "toolpool-call", log)
			if err != nil {
				return cli.Unavailable(err)
			}
			defer nc.Close()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			res, err := callOnce(ctx, nc, log, tp.TracerProvider(), session, tool, json.RawMessage(input))
			if err != nil {
				return cli.Unavailable(err)
			}
			block := res.ToolResult()
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

// callOnce sends one call of tool with input through the pool nc is
// connected to, as an agent's tool_use block with a new id, and returns
// its result: an orchestrator of its own, under a new instance and
// without a poison watcher, for the one call (its spans go to tp, when
// not nil). An error means the call
// could not be made (no pool, no stream); a call that failed is a result
// with IsError.
func callOnce(ctx context.Context, nc *nats.Conn, log *slog.Logger, tp trace.TracerProvider, session, tool string, input json.RawMessage) (toolpool.Result, error) {
	orch, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{
		Conn: nc, NoPoisonWatcher: true, Logger: log, Instance: "call-" + randomID(), TracerProvider: tp,
	})
	if err == nil {
		err = orch.Start(ctx)
	}
	if err != nil {
		return toolpool.Result{}, err
	}
	defer orch.Stop(context.WithoutCancel(ctx))
	results, err := orch.Dispatch(ctx, session, []toolpool.ToolUse{{
		Type: "tool_use", ID: "toolu_cli_" + randomID(), Name: tool, Input: input,
	}})
	if err != nil {
		return toolpool.Result{}, err
	}
	return results[0], nil
}

// randomID is 22 random letters and digits: an id no other call has.
func randomID() string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var b [22]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}
