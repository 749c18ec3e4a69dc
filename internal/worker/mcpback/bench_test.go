package mcpback_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/toolpool/toolpool/internal/worker/catalog"
	"github.com/toolpool/toolpool/pkg/tools"
)

// BenchmarkCall compares one call of a stdio MCP server's echo (a process
// kept running, JSON-RPC over its pipes) with the same work done by an
// exec backend (cat: a process per call, the cheapest process an exec
// backend can run), handler to handler, without the pool around them (the
// pool's path is the same for both). Both get the same input and return
// it as text. The parallel variants run calls from every P at once, as a
// worker's slots do: one stdio process then serves them all.
func BenchmarkCall(b *testing.B) {
	input := json.RawMessage(`{"text":"hello"}`)
	stdio := func(b *testing.B) tools.Handler {
		cfg := stdioConfig()
		cfg.Logger = slog.New(slog.DiscardHandler)
		return handler(b, startBackend(b, cfg), "go_echo")
	}
	exec := func(b *testing.B) tools.Handler {
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
		return rt.Handler
	}
	serial := func(setup func(*testing.B) tools.Handler) func(*testing.B) {
		return func(b *testing.B) {
			h := setup(b)
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				if _, err := h(ctx, input); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	parallel := func(setup func(*testing.B) tools.Handler) func(*testing.B) {
		return func(b *testing.B) {
			h := setup(b)
			ctx := context.Background()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := h(ctx, input); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
	}
	b.Run("mcp_stdio", serial(stdio))
	b.Run("exec", serial(exec))
	b.Run("mcp_stdio_parallel", parallel(stdio))
	b.Run("exec_parallel", parallel(exec))
}
