// Command mcptestserver serves package mcptest's server on stdio, with
// crash_once. With --fail-start it exits at once with an error, as a
// server that cannot start.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/internal/worker/mcpback/internal/mcptest"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--fail-start" {
		fmt.Fprintln(os.Stderr, "mcptestserver: refusing to start, as asked")
		os.Exit(2)
	}
	if err := mcptest.NewServer(mcptest.Options{Crash: true}).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcptestserver:", err)
		os.Exit(1)
	}
}
