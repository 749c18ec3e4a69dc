package mcpback_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/toolpool/toolpool/pkg/catalog"
	"github.com/toolpool/toolpool/pkg/tools"
)

// BenchmarkCall compares one call of a stdio MCP server's echo (a process
// kept running, JSON-RPC over its pipes) with the same work done by an
// exec backend (cat: a process per call), handler to handler, without the
// pool around them (the pool's path is the same for both).
func BenchmarkCall(b *testing.B) {
	input := json.RawMessage(`{"text":"hello"}`)
	b.Run("mcp_stdio", func(b *testing.B) {
		cfg := stdioConfig()
		cfg.Logger = slog.New(slog.DiscardHandler)
		h := handler(b, startBackend(b, cfg), "go_echo")
		ctx := context.Background()
		b.ResetTimer()
		for b.Loop() {
			if _, err := h(ctx, input); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("exec", func(b *testing.B) {
		f, err := catalog.Parse("tools.yaml", []byte(`tools:
  - name: echo
    description: Returns its input.
    input_schema: {type: object}
    backend: exec
    exec: {command: [cat]}
`), catalog.Options{})
		if err != nil {
			b.Fatal(err)
		}
		reg := tools.NewRegistry()
		if err := f.Apply(reg, nil); err != nil {
			b.Fatal(err)
		}
		rt, _ := reg.Lookup("echo")
		ctx := context.Background()
		b.ResetTimer()
		for b.Loop() {
			if _, err := rt.Handler(ctx, input); err != nil {
				b.Fatal(err)
			}
		}
	})
}
