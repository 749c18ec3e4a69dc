package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/promtest"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestWorkerObservability runs the worker binary with a catalog webhook
// tool whose endpoint fails, and --metrics. The call's trace context
// travels from the dispatcher (envelope and NATS header) to the webhook
// request and into the worker's JSON log line about the failure, which
// carries tool, call id, attempt and session and none of the secret
// header's value. The worker's /metrics counts the failure and passes
// promtool; its /readyz answers 200 once it serves.
func TestWorkerObservability(t *testing.T) {
	t.Parallel()
	bin := buildWorker(t)
	srv, nc, j := natstest.StartProvisioned(t)

	const secret = "tp-secret-7f3a9c1e5b"
	var mu sync.Mutex
	var seen http.Header
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r.Header.Clone()
		mu.Unlock()
		// A careless service echoes the credential it refuses.
		http.Error(w, "token "+r.Header.Get("Authorization")+" is not allowed", http.StatusForbidden)
	}))
	defer api.Close()
	catalog := filepath.Join(t.TempDir(), "tools.yaml")
	yaml := fmt.Sprintf(`tools:
  - name: secure_api
    description: Calls an API that needs a token.
    input_schema: {type: object, properties: {q: {type: string}}}
    timeout: 5s
    backend: webhook
    webhook:
      url: %s/v1/query
      headers:
        Authorization: Bearer ${TP_TEST_TOKEN}
`, api.URL)
	if err := os.WriteFile(catalog, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}

	metricsAddr := natstest.FreeAddr(t)
	cmd := exec.Command(bin, "--nats-url", srv.ClientURL(), "--tools", catalog, "--builtin-tools=false",
		"--log-format", "json", "--metrics", metricsAddr, "--id", "obs-worker")
	cmd.Env = append(os.Environ(), "TP_TEST_TOKEN="+secret)
	var logs natstest.LockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()

	base := "http://" + metricsAddr
	deadline := time.Now().Add(time.Minute)
	for {
		code, _ := httpGet(t, base+"/readyz")
		if code == http.StatusOK {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the worker exited (%v):\n%s", err, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz never answered 200 (last %d):\n%s", code, logs.String())
		}
	}

	// Watch the call message itself for its headers.
	sub, err := nc.SubscribeSync(jetstream.CallSubject("secure_api"))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	d, err := dispatch.New(dispatch.Config{JS: j, Catalog: discovery.ConsumerCatalog(j, time.Millisecond), Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { stopped, stop := context.WithCancel(context.Background()); stop(); _ = d.Stop(stopped) }()
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	tp := "00-" + traceID + "-00f067aa0ba902b7-01"
	res, err := d.Dispatch(dispatch.WithTraceparent(ctx, tp), "obs-session", []envelope.ToolUseBlock{
		{Type: "tool_use", ID: "toolu_obs_webhook", Name: "secure_api", Input: json.RawMessage(`{"q":"x"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].IsError || res[0].Class != envelope.ClassPermanent {
		t.Fatalf("result: %+v", res[0])
	}
	if strings.Contains(fmt.Sprint(res[0].Content), secret) {
		t.Errorf("the result shows the secret: %s", res[0].Content)
	}

	msg, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("the call message: %v", err)
	}
	if got := msg.Header.Get(envelope.HeaderTraceparent); got != tp {
		t.Errorf("call message header %s = %q, want %q", envelope.HeaderTraceparent, got, tp)
	}
	mu.Lock()
	got := seen.Get("Traceparent")
	mu.Unlock()
	if got != tp {
		t.Errorf("the webhook request's traceparent = %q, want %q", got, tp)
	}

	// The worker's log line about the failed call.
	var line map[string]any
	deadline = time.Now().Add(time.Minute)
	for line == nil {
		line = findLog(logs.String(), "call failed", "toolu_obs_webhook")
		if line == nil && time.Now().After(deadline) {
			t.Fatalf("no log line about the failed call:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for key, want := range map[string]any{
		"tool": "secure_api", "call_id": "toolu_obs_webhook", "attempt": float64(1),
		"session": "obs-session", "class": "permanent", "code": "http_403",
	} {
		if line[key] != want {
			t.Errorf("log line %s = %v, want %v: %v", key, line[key], want, line)
		}
	}
	if tpLogged, _ := line["traceparent"].(string); !strings.Contains(tpLogged, traceID) {
		t.Errorf("the log line does not carry the trace id %s: %v", traceID, line)
	}

	// Metrics: the failure is counted, and promtool finds nothing to lint.
	// The worker observes a call after its result and its attempt record are
	// written, so the count may trail the result a little.
	var text []byte
	finished := func() float64 {
		return promtest.Parse(t, text).Value("toolpool_worker_calls_finished_total", "tool", "secure_api", "outcome", "error", "class", "permanent")
	}
	natstest.Eventually(t, time.Minute, "the failed call to be counted", func() bool {
		text = promtest.Scrape(t, base+"/metrics")
		return finished() >= 1
	})
	if got := finished(); got != 1 {
		t.Errorf("finished calls of secure_api (error, permanent) = %v, want 1", got)
	}
	f := promtest.Parse(t, text)
	if !f.Has("go_goroutines") || !f.Has("process_cpu_seconds_total") {
		t.Error("the worker's scrape lacks the runtime metrics")
	}
	t.Run("promtool check metrics", func(t *testing.T) { promtest.CheckMetrics(t, text) })

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Errorf("the worker exited with %v after SIGTERM", err)
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the worker's logs hold the secret:\n%s", logs.String())
	}
}

// findLog returns the JSON log record with msg whose call_id is callID.
func findLog(logs, msg, callID string) map[string]any {
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == msg && rec["call_id"] == callID {
			return rec
		}
	}
	return nil
}
