package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nuid"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/pkg/discovery"
	"github.com/toolpool/toolpool/pkg/dispatch"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// call sends one tool call through the pool and prints its tool_result block.
// Exit 0 on success, 1 when the result is an error, 2 on usage or connection
// errors.
func call(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("orchestrator call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: orchestrator call [flags] TOOL 'JSON'\n\nSends one tool call through the pool and prints its tool_result block.\nExit 0 on success, 1 when the result is an error, 2 on usage or connection errors.\n\nflags:")
		fs.PrintDefaults()
	}
	var natsFlags cli.NATSFlags
	natsFlags.Register(fs)
	session := fs.String("session", "", "agent session id (scopes the repeated-failure advice)")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the result")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fs.Usage()
		return cli.ExitUsage
	}
	tool, input := fs.Arg(0), "{}"
	if fs.NArg() == 2 {
		input = fs.Arg(1)
	}
	if !json.Valid([]byte(input)) {
		fmt.Fprintf(stderr, "orchestrator call: the input %q is not valid JSON; give a JSON object such as '{\"text\":\"hi\"}'\n", input)
		return cli.ExitUsage
	}
	if *timeout <= 0 {
		fmt.Fprintln(stderr, "orchestrator call: --timeout must be positive")
		return cli.ExitUsage
	}

	log := cli.WarnLogger(stderr)
	nc, jsCtx, err := natsFlags.ConnectJetStream("toolpool-call", log)
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator call:", err)
		return cli.ExitUsage
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	live, err := discovery.NewCatalog(discovery.CatalogConfig{JetStream: jsCtx, Logger: log})
	if err == nil {
		err = live.Start(ctx)
	}
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator call:", err)
		return cli.ExitUsage
	}
	defer live.Stop(context.Background())
	d, err := dispatch.New(dispatch.Config{
		JS: jsCtx, Catalog: live, Logger: log,
		Instance: "call-" + nuid.Next(),
	})
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator call:", err)
		return cli.ExitUsage
	}
	if err := d.Start(ctx); err != nil {
		fmt.Fprintln(stderr, "orchestrator call:", err)
		return cli.ExitUsage
	}
	defer d.Stop(context.Background())

	blocks, err := d.DispatchBlocks(ctx, *session, []envelope.ToolUseBlock{{
		Type: "tool_use", ID: "toolu_cli_" + nuid.Next(), Name: tool, Input: json.RawMessage(input),
	}})
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator call:", err)
		return cli.ExitUsage
	}
	out, err := json.MarshalIndent(blocks[0], "", "  ")
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator call:", err)
		return cli.ExitIsError
	}
	fmt.Fprintln(stdout, string(out))
	if blocks[0].IsError {
		return cli.ExitIsError
	}
	return cli.ExitOK
}
