package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/pkg/tools"
)

// stdioRPC is `orchestrator mcp` driven line by line (the go-sdk client
// knows no tasks).
type stdioRPC struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan []byte
	id    int
	logs  *natstest.LockedBuffer
}

func startStdioRPC(t *testing.T, bin string, args ...string) *stdioRPC {
	t.Helper()
	r := &stdioRPC{logs: &natstest.LockedBuffer{}, lines: make(chan []byte, 64)}
	r.cmd = exec.Command(bin, append([]string{"mcp", "--workspace", t.TempDir()}, args...)...)
	r.cmd.Stderr = r.logs
	var err error
	if r.in, err = r.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.lines)
		br := bufio.NewReader(out)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			r.lines <- line
		}
	}()
	t.Cleanup(func() {
		_ = r.in.Close()
		done := make(chan struct{})
		go func() { _ = r.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = r.cmd.Process.Kill()
			<-done
		}
	})
	return r
}

// call sends one request and waits for its answer.
func (r *stdioRPC) call(t *testing.T, method, params string) (result json.RawMessage, rpcErr *struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}) {
	t.Helper()
	r.id++
	if _, err := fmt.Fprintf(r.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", r.id, method, params); err != nil {
		t.Fatalf("%s: %v\n%s", method, err, r.logs)
	}
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				t.Fatalf("%s: orchestrator mcp ended\n%s", method, r.logs)
			}
			var a struct {
				ID     *int            `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if json.Unmarshal(line, &a) == nil && a.ID != nil && *a.ID == r.id {
				return a.Result, a.Error
			}
		case <-deadline:
			t.Fatalf("%s: no answer\n%s", method, r.logs)
		}
	}
}

// TestMCPStdioTasksSurviveKill: two `orchestrator mcp` processes on one
// JetStream (two hosts' stdio servers of one pool). A task created through
// the first (2025-11-25's params.task) is read through the second while
// its tool runs; the first is killed (SIGKILL) meanwhile; the second's
// tasks/result answers the tool's result once the tool ends, and the tool
// ran once.
func TestMCPStdioTasksSurviveKill(t *testing.T) {
	t.Parallel()
	bin := orchestratorBin(t)
	srv, _, _ := natstest.StartProvisioned(t)

	var mu sync.Mutex
	runs := 0
	open, started := make(chan struct{}), make(chan struct{}, 4)
	var once sync.Once
	release := func() { once.Do(func() { close(open) }) }
	t.Cleanup(release)
	reg := tools.NewRegistry()
	reg.MustRegister(tools.Tool{Name: "gate", InputSchema: json.RawMessage(`{"type":"object"}`), Timeout: 2 * time.Minute,
		Handler: func(ctx context.Context, in json.RawMessage) (tools.Output, error) {
			mu.Lock()
			runs++
			mu.Unlock()
			started <- struct{}{}
			select {
			case <-open:
				return tools.Text("opened " + string(in)), nil
			case <-ctx.Done():
				return tools.Output{}, ctx.Err()
			}
		}})
	pooltest.StartServer(t, srv.ClientURL(), reg, func(c *pooltest.ServerConfig) { c.NoAnnounce = false })

	// The killed process's task is adopted a lease after its last refresh:
	// 4 s here rather than the default 15 s.
	first := startStdioRPC(t, bin, "--nats-url", srv.ClientURL(), "--async-lease", "4s")
	second := startStdioRPC(t, bin, "--nats-url", srv.ClientURL(), "--async-lease", "4s")
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
		} `json:"task"`
	}
	natstest.Eventually(t, time.Minute, "a task of gate created (the catalog lists it)", func() bool {
		res, rpcErr := first.call(t, "tools/call", `{"name":"gate","arguments":{"k":1},"task":{}}`)
		return rpcErr == nil && json.Unmarshal(res, &created) == nil && created.Task.TaskID != ""
	})
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatalf("the tool did not start\n%s", first.logs)
	}
	res, rpcErr := second.call(t, "tasks/get", `{"taskId":"`+created.Task.TaskID+`"}`)
	if rpcErr != nil || !strings.Contains(string(res), `"status":"working"`) {
		t.Fatalf("tasks/get through the second: %s %+v", res, rpcErr)
	}
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	release()
	res, rpcErr = second.call(t, "tasks/result", `{"taskId":"`+created.Task.TaskID+`"}`)
	if rpcErr != nil || !strings.Contains(string(res), `opened {\"k\":1}`) {
		t.Fatalf("tasks/result through the second: %s %+v\n%s", res, rpcErr, second.logs)
	}
	mu.Lock()
	defer mu.Unlock()
	if runs != 1 {
		t.Errorf("the tool ran %d times, want 1", runs)
	}
}
