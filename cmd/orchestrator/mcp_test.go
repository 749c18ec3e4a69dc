package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/internal/testbin"
	"github.com/toolpool/toolpool/pkg/tools"
)

// mcpStdio starts `orchestrator mcp args…` as a host does and connects a
// go-sdk client to its stdio.
func mcpStdio(t *testing.T, bin string, opts *mcp.ClientOptions, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"mcp", "--workspace", t.TempDir()}, args...)...)
	logs := &natstest.LockedBuffer{}
	cmd.Stderr = logs
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host"}, opts).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to orchestrator mcp: %v\n%s", err, logs)
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil && !strings.Contains(err.Error(), "signal") {
			t.Logf("close: %v\n%s", err, logs)
		}
	})
	return cs
}

// TestMCPStdio: a go-sdk client runs `orchestrator mcp` as a host would:
// with no --nats-url it gets the in-process pool (list, call, isError,
// validation error, unknown tool); with --nats-url it gets that pool's
// live catalog, and list_changed when a worker starts and stops.
func TestMCPStdio(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := testbin.Build(dir, "./cmd/orchestrator"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "orchestrator")

	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		cs := mcpStdio(t, bin, nil, "--workers", "1")
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		var lt *mcp.ListToolsResult
		natstest.Eventually(t, time.Minute, "the demo tools listed", func() bool {
			var err error
			lt, err = cs.ListTools(ctx, nil)
			return err == nil && slices.ContainsFunc(lt.Tools, func(tl *mcp.Tool) bool { return tl.Name == "echo" })
		})
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "over stdio"}})
		if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "over stdio" {
			t.Fatalf("echo: %+v, %v", res, err)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "flaky", Arguments: map[string]any{"fail": "404", "times": 1}})
		if err != nil || !res.IsError {
			t.Fatalf("flaky 404: %+v, %v", res, err)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
		if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "text") {
			t.Fatalf("echo without text: %+v, %v", res, err)
		}
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("unknown tool: %v", err)
		}
	})

	t.Run("nats-url", func(t *testing.T) {
		t.Parallel()
		srv, _, _ := natstest.StartProvisioned(t)
		changed := make(chan struct{}, 16)
		cs := mcpStdio(t, bin, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		}, "--nats-url", srv.ClientURL())
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		hasExtra := func() bool {
			lt, err := cs.ListTools(ctx, nil)
			return err == nil && slices.ContainsFunc(lt.Tools, func(tl *mcp.Tool) bool { return tl.Name == "extra" })
		}
		if hasExtra() {
			t.Fatal("extra listed before its worker started")
		}
		reg := tools.NewRegistry()
		reg.MustRegister(tools.Tool{Name: "extra", InputSchema: json.RawMessage(`{"type":"object"}`),
			Handler: func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text("extra"), nil }})
		w := pooltest.StartServer(t, srv.ClientURL(), reg, func(c *pooltest.ServerConfig) { c.NoAnnounce = false })
		waitChanged(t, changed, "a worker started", hasExtra)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "extra", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("extra: %+v, %v", res, err)
		}
		if err := w.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		waitChanged(t, changed, "the worker stopped", func() bool { return !hasExtra() })
	})
}

func waitChanged(t *testing.T, changed <-chan struct{}, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case <-changed:
			if cond() {
				return
			}
		case <-deadline:
			t.Fatalf("%s: no list_changed", what)
		}
	}
}

// TestServeMCPToken: serve's /mcp needs --mcp-token when given (401
// without it), next to the HTTP API; a token too short is a usage error;
// a non-loopback address without authentication keeps /mcp closed unless
// --mcp-insecure-no-auth.
func TestServeMCPToken(t *testing.T) {
	t.Parallel()
	const token = "serve-mcp-token-0123456789"
	base := startServe(t, "--mcp-token", token)
	ping := func(tok string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := ping(""); got != http.StatusUnauthorized {
		t.Errorf("without the token: %d", got)
	}
	if got := ping(token); got == http.StatusUnauthorized || got >= 500 {
		t.Errorf("with the token: %d", got)
	}

	if _, err := parseServe([]string{"--mcp-token", "short"}, &natstest.LockedBuffer{}); err == nil || !strings.Contains(err.Error(), "--mcp-token") {
		t.Errorf("a short token: %v", err)
	}
	f, err := parseServe([]string{"--http", "0.0.0.0:8080", "--http-insecure-no-auth", "--ui-insecure-no-auth"}, &natstest.LockedBuffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c := f.front.mcpConfig(f.httpAddr); !strings.Contains(c.Closed, "--mcp-insecure-no-auth") {
		t.Errorf("an open non-loopback address: /mcp not closed: %+v", c)
	}
	f, err = parseServe([]string{"--http", "0.0.0.0:8080", "--http-insecure-no-auth", "--ui-insecure-no-auth", "--mcp-insecure-no-auth"}, &natstest.LockedBuffer{})
	if err != nil || f.front.mcpConfig(f.httpAddr).Closed != "" {
		t.Errorf("--mcp-insecure-no-auth: %v", err)
	}
	f, err = parseServe([]string{"--http", "0.0.0.0:8080", "--http-insecure-no-auth", "--ui-insecure-no-auth", "--mcp-token", token}, &natstest.LockedBuffer{})
	if err != nil || f.front.mcpConfig(f.httpAddr).Closed != "" {
		t.Errorf("a token on a non-loopback address: %v", err)
	}
}
