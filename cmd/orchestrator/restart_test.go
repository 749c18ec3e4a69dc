package main

import (
	"bufio"
	"bytes"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
)

// TestServeRestartAnswersRepostFromStoredResult reproduces issue 23's
// graceful-restart duplicate on real processes: a `sleep` call in flight
// at a SIGINT of serve got its result during the drain; the same turn
// posted again to the restarted serve (same --data-dir) ran the tool a
// second time, because the restarted embedded server rebuilds its
// duplicate window only from the messages still stored and a finished call
// has left TOOL_CALLS. Now the re-post is answered with the stored result
// and the new process runs nothing.
func TestServeRestartAnswersRepostFromStoredResult(t *testing.T) {
	t.Parallel()
	bin := orchestratorBin(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	args := []string{"--data-dir", dataDir, "--nats-listen", "127.0.0.1:0", "--workers", "1", "--drain-timeout", "30s"}
	const turn = `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_restart_1","name":"sleep","input":{"ms":2000}}]}`

	first := runServeProc(t, bin, nil, args...)
	first.waitHealthy(t)
	waitTools(t, first.http)
	type reply struct {
		status int
		body   []byte
	}
	answered := make(chan reply, 1)
	go func() {
		status, _, body := post(first.http, turn)
		answered <- reply{status, body}
	}()
	natstest.Eventually(t, time.Minute, "the call in flight", func() bool {
		_, _, body := httpDo(t, "GET", first.http+"/metrics", "")
		return bytes.Contains(body, []byte("\ntoolpool_dispatch_pending_calls 1\n"))
	})
	if err := first.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var r reply
	select {
	case r = <-answered:
	case <-time.After(time.Minute):
		t.Fatalf("the call in flight at SIGINT was never answered:\n%s", first.Output())
	}
	if r.status != http.StatusOK || bytes.Contains(r.body, []byte(`"is_error"`)) {
		t.Fatalf("the call in flight at SIGINT: %d %s", r.status, r.body)
	}
	if code := first.waitExit(t); code != 0 {
		t.Fatalf("serve exited %d after SIGINT:\n%s", code, first.Output())
	}

	second := runServeProc(t, bin, nil, args...)
	second.waitHealthy(t)
	waitTools(t, second.http)
	status, _, body := post(second.http, turn)
	if status != http.StatusOK || !bytes.Equal(body, r.body) {
		t.Errorf("the same turn after the restart: %d %s; want the stored answer %s", status, body, r.body)
	}
	_, _, metrics := httpDo(t, "GET", second.http+"/metrics", "")
	if n := metricSum(metrics, "toolpool_worker_attempts_total{", `tool="sleep"`); n != 0 {
		t.Errorf("the restarted serve ran sleep %v times; want 0 (the call ran before the restart)", n)
	}
}

// metricSum adds the values of the series of metrics whose line starts
// with prefix and contains label.
func metricSum(metrics []byte, prefix, label string) float64 {
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(metrics))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) || !strings.Contains(line, label) {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// TestServeStopLeavesRunningCallToFinish: a call still running when a
// graceful stop's HTTP drain runs out used to be cancelled pool-wide with
// its request (the connection closed): the tool was stopped mid-run and
// the same turn posted again after the restart ran it from the start. Now
// the call is left to run; the workers' drain lets it finish and store its
// result, and the re-post is answered with it, running nothing.
func TestServeStopLeavesRunningCallToFinish(t *testing.T) {
	t.Parallel()
	bin := orchestratorBin(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	args := []string{"--data-dir", dataDir, "--nats-listen", "127.0.0.1:0", "--workers", "1",
		"--drain-timeout", "60s", "--http-drain-timeout", "500ms"}
	const turn = `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_stop_1","name":"sleep","input":{"ms":4000}}]}`

	first := runServeProc(t, bin, nil, args...)
	first.waitHealthy(t)
	waitTools(t, first.http)
	cut := make(chan int, 1)
	go func() {
		status, _, _ := post(first.http, turn)
		cut <- status
	}()
	natstest.Eventually(t, time.Minute, "the call running", func() bool {
		_, _, body := httpDo(t, "GET", first.http+"/metrics", "")
		return bytes.Contains(body, []byte("\ntoolpool_dispatch_pending_calls 1\n")) &&
			metricSum(body, "toolpool_worker_calls_in_flight{", `tool="sleep"`) == 1
	})
	if err := first.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case status := <-cut:
		if status == http.StatusOK {
			t.Fatalf("the call finished within the 500ms HTTP drain; the test needs it cut")
		}
	case <-time.After(time.Minute):
		t.Fatal("the request was not cut at the end of the HTTP drain")
	}
	if code := first.waitExit(t); code != 0 {
		t.Fatalf("serve exited %d after SIGINT:\n%s", code, first.Output())
	}

	second := runServeProc(t, bin, nil, args...)
	second.waitHealthy(t)
	waitTools(t, second.http)
	status, _, body := post(second.http, turn)
	if status != http.StatusOK || bytes.Contains(body, []byte(`"is_error"`)) {
		t.Errorf("the same turn after the restart: %d %s; want the stored result", status, body)
	}
	_, _, metrics := httpDo(t, "GET", second.http+"/metrics", "")
	if n := metricSum(metrics, "toolpool_worker_attempts_total{", `tool="sleep"`); n != 0 {
		t.Errorf("the restarted serve ran sleep %v times; want 0 (it finished during the first one's stop)", n)
	}
}
