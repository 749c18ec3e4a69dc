package toolpool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/toolpool/toolpool"
)

// A whole pool in one program: an embedded JetStream server, its
// streams, a server running the program's own tool, and an orchestrator
// that dispatches a model's tool calls to it.
func ExampleNewOrchestrator() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "toolpool-example-")
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.DiscardHandler)

	emb, _ := toolpool.NewEmbedded(toolpool.EmbeddedConfig{Listen: "127.0.0.1:-1", DataDir: dir, Logger: quiet})
	if err := emb.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer emb.Stop(ctx)
	nc, err := emb.Connect("example")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	if err := toolpool.Provision(ctx, nc, toolpool.StreamsConfig{}); err != nil {
		log.Fatal(err)
	}

	reg := toolpool.NewRegistry()
	reg.MustRegister(toolpool.Tool{
		Name:        "add",
		Description: "Adds two integers.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`),
		Handler: func(ctx context.Context, input json.RawMessage) (toolpool.Output, error) {
			var in struct{ A, B int }
			if err := json.Unmarshal(input, &in); err != nil {
				return toolpool.Output{}, toolpool.Permanent(err)
			}
			return toolpool.Text(fmt.Sprint(in.A + in.B)), nil
		},
	})
	srv, _ := toolpool.NewServer(toolpool.ServerConfig{Conn: nc, Registry: reg, Logger: quiet})
	if err := srv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer srv.Stop(ctx)

	orch, _ := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: nc, Logger: quiet})
	if err := orch.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer orch.Stop(ctx)

	results, err := orch.Dispatch(ctx, "session-1", []toolpool.ToolUse{
		{ID: "toolu_1", Name: "add", Input: json.RawMessage(`{"a":2,"b":3}`)},
		{ID: "toolu_2", Name: "add", Input: json.RawMessage(`{"a":"two"}`)},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		fmt.Printf("%s is_error=%v class=%q\n", r.CallID, r.IsError, r.Class)
	}
	fmt.Println(results[0].Content.Text())
	// Output:
	// toolu_1 is_error=false class=""
	// toolu_2 is_error=true class="validation"
	// 5
}
