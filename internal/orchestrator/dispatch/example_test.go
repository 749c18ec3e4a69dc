package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// A turn with two tool calls, dispatched through the pool.
func ExampleDispatcher_DispatchBlocks() {
	var j js.JetStream // connected to a server with the toolpool streams provisioned

	d, err := dispatch.New(dispatch.Config{
		JS:       j,
		Instance: "orch-1",
		Catalog:  discovery.ConsumerCatalog(j, 2*time.Second),
		Logger:   slog.Default(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := d.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	defer d.Stop(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = dispatch.WithTraceparent(ctx, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	blocks, err := d.DispatchBlocks(ctx, "session-42", []envelope.ToolUseBlock{
		{Type: "tool_use", ID: "toolu_01", Name: "echo", Input: json.RawMessage(`{"text":"hello"}`)},
		{Type: "tool_use", ID: "toolu_02", Name: "sleep", Input: json.RawMessage(`{"ms":100}`)},
	})
	if errors.Is(err, dispatch.ErrUnavailable) {
		fmt.Println("the pool is unavailable; try again later")
		return
	}
	for _, b := range blocks {
		fmt.Println(b.ToolUseID, b.IsError, b.Content.Text())
	}
}
