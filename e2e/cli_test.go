package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/proctest"
)

// cliRun is one finished run of a command.
type cliRun struct {
	code           int
	stdout, stderr string
}

// runCLI runs orchestrator with args and waits up to limit for it to exit.
func runCLI(t *testing.T, limit time.Duration, args ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, orchestratorBin, args...)
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("orchestrator %s did not exit within %v\nstderr:\n%s", strings.Join(args, " "), limit, stderr.String())
	}
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("orchestrator %s: %v", strings.Join(args, " "), err)
	}
	return cliRun{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// toolResultJSON is a tool_result block as the CLI prints it, with
// is_error kept apart to tell "absent" from "false".
type toolResultJSON struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

func parseToolResult(t *testing.T, stdout string) (toolResultJSON, map[string]json.RawMessage) {
	t.Helper()
	var r toolResultJSON
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("stdout is not a tool_result JSON: %v\n%s", err, stdout)
	}
	var keys map[string]json.RawMessage
	_ = json.Unmarshal([]byte(stdout), &keys)
	if r.Type != "tool_result" || !strings.HasPrefix(r.ToolUseID, "toolu_") {
		t.Errorf("type, tool_use_id = %q, %q; want tool_result and a tool_use id", r.Type, r.ToolUseID)
	}
	return r, keys
}

func (r toolResultJSON) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// The orchestrator binary: serve with an embedded server, then call tools
// through it from separate processes, then SIGTERM.
func TestCLIServeAndCall(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	natsAddr, httpAddr := natstest.FreeAddr(t), natstest.FreeAddr(t)
	natsURL := "nats://" + natsAddr
	serve := proctest.Start(t, orchestratorBin, "serve",
		"--data-dir", filepath.Join(tmp, "data"),
		"--nats-listen", natsAddr,
		"--http", httpAddr,
		"--workspace", filepath.Join(tmp, "ws"),
		"--drain-timeout", "5s")

	serve.WaitHTTP("http://"+httpAddr+"/readyz", waitLong)

	t.Run("calls", func(t *testing.T) {
		t.Run("echo", func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, waitLong, "call", "--nats-url", natsURL, "echo", `{"text":"hi"}`)
			if r.code != 0 {
				t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			res, keys := parseToolResult(t, r.stdout)
			if res.text() != "hi" {
				t.Errorf("content %q, want %q", res.text(), "hi")
			}
			if _, ok := keys["is_error"]; ok {
				t.Errorf("a successful tool_result has an is_error key: %s", r.stdout)
			}
		})
		t.Run("flaky 503 twice", func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, waitLong, "call", "--nats-url", natsURL, "--timeout", "30s", "flaky", `{"fail":"503","times":2}`)
			if r.code != 0 {
				t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			if res, _ := parseToolResult(t, r.stdout); res.text() != "ok after 3 attempts" {
				t.Errorf("content %q, want %q", res.text(), "ok after 3 attempts")
			}
		})
		t.Run("flaky 404", func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, waitLong, "call", "--nats-url", natsURL, "flaky", `{"fail":"404"}`)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			_, keys := parseToolResult(t, r.stdout)
			if string(keys["is_error"]) != "true" {
				t.Errorf("is_error = %s, want true: %s", keys["is_error"], r.stdout)
			}
		})
		t.Run("unknown tool", func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, waitLong, "call", "--nats-url", natsURL, "nope", `{}`)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			res, keys := parseToolResult(t, r.stdout)
			if string(keys["is_error"]) != "true" {
				t.Errorf("is_error = %s, want true", keys["is_error"])
			}
			for _, tool := range []string{"echo", "flaky", "sleep"} {
				if !strings.Contains(res.text(), tool) {
					t.Errorf("content does not list %s: %q", tool, res.text())
				}
			}
		})
		t.Run("input not JSON", func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, waitLong, "call", "--nats-url", natsURL, "echo", "not json")
			if r.code != 2 {
				t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
		})
		t.Run("no server", func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, 30*time.Second, "call", "--nats-url", "nats://127.0.0.1:1", "echo", `{}`)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			if r.stderr == "" {
				t.Error("no explanation on stderr")
			}
		})
	})

	if err := serve.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := serve.Wait(waitLong); code != 0 {
		t.Errorf("orchestrator serve exited with status %d after SIGTERM, want 0", code)
	}
}
