package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/proctest"
	"github.com/toolpool/toolpool/internal/testbin"
	"github.com/toolpool/toolpool/jetstream"
)

// TestServeRefusesBadInstance: --instance becomes a subject token
// (tools.result.<instance>.<key>) and part of consumer names; a dotted, wildcard
// or overlong one is refused by name before anything starts.
func TestServeRefusesBadInstance(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"orch.1", "a*", "a b", strings.Repeat("o", 5000)} {
		_, err := parseServe([]string{"--instance", bad}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--instance") || !strings.Contains(err.Error(), "subject token") {
			t.Errorf("--instance %.20q: err %v; want one naming --instance", bad, err)
		}
	}
	if _, err := parseServe([]string{"--instance", "orch-eu_1"}, io.Discard); err != nil {
		t.Errorf("--instance orch-eu_1: %v", err)
	}
}

// TestServeRefusesShortAsyncLease: a task's replica refreshes its lease
// every third of it; a lease under a second would have live replicas'
// tasks adopted between their refreshes. The flag is refused by name.
func TestServeRefusesShortAsyncLease(t *testing.T) {
	t.Parallel()
	_, err := parseServe([]string{"--async-lease", "500ms"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--async-lease is 500ms; it must be at least 1s") {
		t.Errorf("--async-lease 500ms: err %v; want one naming --async-lease", err)
	}
	if _, err := parseServe([]string{"--async-lease", "5s"}, io.Discard); err != nil {
		t.Errorf("--async-lease 5s: %v", err)
	}
}

// TestServeRefusesNonPositiveReconnectWait: --nats-reconnect-wait 0 is a
// usage error naming the flag, not a silent 2 s.
func TestServeRefusesNonPositiveReconnectWait(t *testing.T) {
	t.Parallel()
	_, err := parseServe([]string{"--nats-reconnect-wait", "0s"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--nats-reconnect-wait is 0s; it must be positive") {
		t.Errorf("--nats-reconnect-wait 0s: err %v; want one naming --nats-reconnect-wait", err)
	}
	if _, err := parseServe([]string{"--nats-reconnect-wait", "200ms"}, io.Discard); err != nil {
		t.Errorf("--nats-reconnect-wait 200ms: %v", err)
	}
}

// orchestratorBin builds the orchestrator binary (once per go test run:
// testbin shares it).
func orchestratorBin(t *testing.T) string {
	t.Helper()
	return testbin.Program(t, "./cmd/orchestrator")
}

// serveProc is an `orchestrator serve` process of a test.
type serveProc struct {
	*proctest.Proc
	http string // base URL
}

// runServeProc starts the binary's serve with its HTTP server on a free
// port; it is killed when the test ends.
func runServeProc(t *testing.T, bin string, env []string, args ...string) *serveProc {
	t.Helper()
	addr := natstest.FreeAddr(t)
	p := &serveProc{http: "http://" + addr}
	p.Proc = proctest.Command{
		Name: "orchestrator serve", Path: bin, Env: append(os.Environ(), env...),
		Args: append([]string{"serve", "--http", addr, "--workspace", t.TempDir()}, args...),
	}.Start(t)
	return p
}

// waitHealthy waits until p's /healthz answers 200.
func (p *serveProc) waitHealthy(t *testing.T) {
	t.Helper()
	p.WaitHTTP(p.http+"/healthz", time.Minute)
}

// waitExit waits up to a minute for p to exit and returns its exit code.
func (p *serveProc) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(time.Minute):
		code, body := httpStatus(p.http + "/healthz")
		t.Fatalf("orchestrator serve still runs after a minute (/healthz %d %s):\n%s", code, body, p.Output())
	}
	var exit *exec.ExitError
	if errors.As(p.Err(), &exit) {
		return exit.ExitCode()
	}
	if p.Err() != nil {
		t.Fatal(p.Err())
	}
	return 0
}

func httpStatus(url string) (int, string) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestServeExitsWhenConnectionClosedForGood: serve connected to a server
// that stops accepting its credentials (nats.go closes the connection for
// good after the second refusal) used to stay up with /healthz 200 and
// answer nothing; it now exits non-zero so that its supervisor restarts it.
// serve reconnects every 200 ms (--nats-reconnect-wait; 2 s by default,
// which only spaces the two refusals further apart).
func TestServeExitsWhenConnectionClosedForGood(t *testing.T) {
	t.Parallel()
	srv := natstest.StartPasswordServer(t, "orch", "first-secret")
	url := srv.URL

	p := runServeProc(t, orchestratorBin(t), []string{"NATS_USER=orch", "NATS_PASSWORD=first-secret"},
		"--nats-url", url, "--workers", "1", "--demo-tools", "--drain-timeout", "30s", "--nats-reconnect-wait", "200ms")
	p.waitHealthy(t)
	srv.ChangePassword(t, "second-secret")
	if code := p.waitExit(t); code == 0 {
		t.Errorf("orchestrator serve exited 0 after losing its connection for good:\n%s", p.Output())
	}
	if !strings.Contains(p.Output(), "closed for good") {
		t.Errorf("the log does not say why serve stopped:\n%s", p.Output())
	}
}

// TestSecondServeOnOneDataDirRefuses reproduces issue 12's sixth finding
// with two real processes: a second `orchestrator serve` on the data dir of
// a running one (other ports) used to come up and corrupt the store ("lmb
// missing"). Now it exits non-zero with a message that names the data dir
// and the process holding it, and the first keeps answering.
func TestSecondServeOnOneDataDirRefuses(t *testing.T) {
	t.Parallel()
	bin := orchestratorBin(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	first := runServeProc(t, bin, nil, "--data-dir", dataDir, "--nats-listen", natstest.FreeAddr(t), "--workers", "1")
	first.waitHealthy(t)
	waitReady(t, first)

	second := runServeProc(t, bin, nil, "--data-dir", dataDir, "--nats-listen", natstest.FreeAddr(t), "--workers", "1")
	if code := second.waitExit(t); code == 0 {
		t.Errorf("the second serve exited 0:\n%s", second.Output())
	}
	abs, _ := filepath.Abs(dataDir)
	msg := second.Output()
	if !strings.Contains(msg, abs) || !strings.Contains(msg, "pid "+strconv.Itoa(first.PID())) {
		t.Errorf("the second serve's message does not name the data dir %s and the first's pid %d:\n%s", abs, first.PID(), msg)
	}

	waitReady(t, first)
	req, err := http.NewRequest(http.MethodPost, first.http+"/v1/tool_calls",
		strings.NewReader(`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_still_here","name":"echo","input":{"text":"still here"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "still here") || strings.Contains(string(body), `"is_error":true`) {
		t.Errorf("the first serve after the second's attempt: %d %s", resp.StatusCode, body)
	}
}

// waitReady waits until p's /readyz answers 200.
func waitReady(t *testing.T, p *serveProc) {
	t.Helper()
	p.WaitHTTP(p.http+"/readyz", time.Minute)
}

// TestServeReadyzReportsUnwritableStore: serve's /readyz used to check only
// that NATS is connected and the streams exist, so it said ready while the
// store refused every call. A real embedded server with a capped store is
// filled up: /readyz now answers 503 naming the store.
func TestServeReadyzReportsUnwritableStore(t *testing.T) {
	t.Parallel()
	srv, err := embedded.Start(embedded.Options{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), MaxStore: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := jetstream.Provision(ctx, j, jetstream.Config{DLQMaxBytes: -1}); err != nil {
		t.Fatal(err)
	}
	orch, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: nc, NoPoisonWatcher: true, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		err = orch.Start(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer orch.Stop(context.Background())
	hs := httptest.NewServer(orch.Handler())
	defer hs.Close()
	if code, body := httpStatus(hs.URL + "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before the store filled up: %d %s", code, body)
	}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for i := 0; ; i++ {
		if _, err := j.Publish(ctx, jetstream.CallSubject("filler"), chunk); err != nil {
			break // the store is full: calls are refused
		}
		if i == 64 {
			t.Fatal("the capped store accepted 4 MiB")
		}
	}
	// The store check runs in the background: /readyz fails from its
	// next refresh (health.RefreshDefault).
	natstest.Eventually(t, time.Minute, "/readyz to answer 503 naming the store", func() bool {
		code, body := httpStatus(hs.URL + "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, `"store"`) && !strings.Contains(body, `"store":"ok"`)
	})
}
