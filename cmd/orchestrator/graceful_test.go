package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
)

// On SIGTERM the real orchestrator binary drains the HTTP requests in
// flight before it stops the pool: a turn still running completes with its
// results, /readyz turns 503 at the start of the drain, and a new request
// meanwhile gets 503 with Retry-After (issue 12, finding 3). The call
// takes longer than the old fixed 5 s shutdown bound plus the workers'
// --drain-timeout.
func TestServeDrainsHTTPOnSIGTERM(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	bin := orchestratorBin(t)
	cmd := exec.Command(bin, "serve", "--data-dir", filepath.Join(tmp, "data"), "--nats-listen", "127.0.0.1:0",
		"--http", "127.0.0.1:0", "--workspace", filepath.Join(tmp, "ws"), "--workers", "1",
		"--drain-timeout", "2s", "--log-format", "json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	logs := &jsonLogs{}
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(io.TeeReader(stderr, logs))
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "http listening" {
				addr, _ := rec["addr"].(string)
				addrCh <- addr
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	var base string
	select {
	case addr := <-addrCh:
		base = "http://" + addr
	case <-time.After(time.Minute):
		t.Fatalf("no http address:\n%s", logs)
	}
	waitTools(t, base)

	const turn = `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_drain_1","name":"sleep","input":{"ms":12000}}]}`
	type reply struct {
		status int
		body   []byte
	}
	first := make(chan reply, 1)
	go func() {
		status, _, body := post(base, turn)
		first <- reply{status, body}
	}()
	natstest.Eventually(t, time.Minute, "the call in flight", func() bool {
		_, _, body := httpDo(t, "GET", base+"/metrics", "")
		return bytes.Contains(body, []byte("\ntoolpool_dispatch_pending_calls 1\n"))
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	readyz := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				break
			}
		}
		if time.Now().After(readyz) {
			t.Errorf("/readyz did not turn 503 during the drain (last: %v)", err)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	status, hdr, body := post(base, `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_drain_2","name":"echo","input":{"text":"late"}}]}`)
	if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !bytes.Contains(body, []byte("shutting down")) {
		t.Errorf("a new request during the drain: %d %v %s", status, hdr, body)
	}
	select {
	case r := <-first:
		if r.status != http.StatusOK || !bytes.Contains(r.body, []byte(`"tool_use_id":"toolu_drain_1"`)) || bytes.Contains(r.body, []byte(`"is_error"`)) {
			t.Errorf("the turn in flight at SIGTERM: %d %s", r.status, r.body)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the turn in flight never completed:\n%s", logs)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit: %v\n%s", err, logs)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the orchestrator did not exit after the drain:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "shutting down") {
		t.Errorf("logs:\n%s", logs)
	}
}

// post sends a JSON turn; a transport error is status 0.
func post(base, body string) (int, http.Header, []byte) {
	req, _ := http.NewRequest("POST", base+"/v1/tool_calls?timeout=60s", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 90 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, []byte(err.Error())
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data
}
