package mcpfront_test

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/builtin"
)

// wantHints are the annotations tools/list must show for each built-in
// tool: read-only, destructive, idempotent, open world.
var wantHints = map[string][4]bool{
	"read_file":    {true, false, true, false},
	"list_dir":     {true, false, true, false},
	"write_file":   {false, true, false, false},
	"http_request": {false, true, false, true},
}

// checkHints compares the listed annotations of the built-in tools with
// wantHints; every hint must be given (none left to the spec's defaults).
func checkHints(t *testing.T, via string, listed []*mcp.Tool) {
	t.Helper()
	seen := 0
	for _, tl := range listed {
		want, ok := wantHints[tl.Name]
		if !ok {
			continue
		}
		seen++
		a := tl.Annotations
		if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
			t.Errorf("%s: %s annotations %+v, want every hint given", via, tl.Name, a)
			continue
		}
		if got := [4]bool{a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint, *a.OpenWorldHint}; got != want {
			t.Errorf("%s: %s readOnly, destructive, idempotent, openWorld = %v, want %v", via, tl.Name, got, want)
		}
	}
	if seen != len(wantHints) {
		t.Errorf("%s: %d of the %d built-in tools listed", via, seen, len(wantHints))
	}
}

// TestBuiltinHints: a worker serving the built-in tools announces their
// hints, and a go-sdk client lists them on /mcp and on stdio: read_file
// and list_dir read-only, write_file destructive, http_request open world.
func TestBuiltinHints(t *testing.T) {
	t.Parallel()
	srv, nc, _ := natstest.StartProvisioned(t)
	reg := tools.NewRegistry()
	closer, err := builtin.Register(reg, builtin.Config{Workspace: filepath.Join(t.TempDir(), "ws")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closer.Close() })
	pooltest.StartServer(t, srv.ClientURL(), reg, func(c *pooltest.ServerConfig) { c.NoAnnounce = false })
	p := servePool(t, nc, func(c *pooltest.OrchestratorConfig) { c.MCP.Token = testToken })

	cs, err := connect(t, p.url, testToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitLong)
	defer cancel()
	// The worker's announcement may come after the orchestrator started.
	var listed []*mcp.Tool
	for {
		lt, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if listed = lt.Tools; len(listed) >= len(wantHints) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkHints(t, "/mcp", listed)

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.orch.MCP().ServeStdio(context.Background(), inR, outW); _ = outW.Close() }()
	c := mcp.NewClient(&mcp.Implementation{Name: "toolpool-test"}, nil)
	stdio, err := c.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lt, err := stdio.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkHints(t, "stdio", lt.Tools)
	_ = stdio.Close()
	_ = inW.Close()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	if err := <-done; err != nil {
		t.Errorf("ServeStdio: %v", err)
	}
}

// servePool starts an orchestrator on nc's live catalog and its HTTP
// server on loopback.
func servePool(t *testing.T, nc *nats.Conn, mod func(*pooltest.OrchestratorConfig)) *pool {
	t.Helper()
	orch := pooltest.StartOrchestrator(t, nc, nil, mod)
	hs, err := orch.NewHTTPServer(httpapi.ServerConfig{Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		orch.MCP().EndStreams()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := hs.Stop(ctx); err != nil {
			t.Errorf("http server Stop: %v", err)
		}
	})
	return &pool{url: "http://" + ln.Addr().String() + "/mcp", orch: orch}
}
