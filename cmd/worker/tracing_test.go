package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
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
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// collector is an OTLP/HTTP endpoint that keeps the bodies posted to
// /v1/traces.
type collector struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		data, _ := io.ReadAll(body)
		if r.URL.Path == "/v1/traces" {
			c.mu.Lock()
			c.bodies = append(c.bodies, data)
			c.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(c.Close)
	return c
}

// all is every body received, concatenated: the spans' names, attribute
// values and ids are in it as they are (protobuf keeps them raw).
func (c *collector) all() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Join(c.bodies, nil)
}

// TestWorkerExportsSpans runs the worker binary with
// OTEL_EXPORTER_OTLP_ENDPOINT set: the webhook tool receives the
// execute_tool span's traceparent (the call's trace, a span of the
// worker's), and after SIGTERM the worker has flushed its spans to the
// endpoint: execute_tool and queued, under service toolpool-worker, in the
// call's trace.
func TestWorkerExportsSpans(t *testing.T) {
	t.Parallel()
	bin := buildWorker(t)
	srv, _, j := natstest.StartProvisioned(t)
	otlp := newCollector(t)

	var mu sync.Mutex
	var sent string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = r.Header.Get("Traceparent")
		mu.Unlock()
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer api.Close()
	catalog := filepath.Join(t.TempDir(), "tools.yaml")
	yaml := fmt.Sprintf(`tools:
  - name: lookup
    description: Looks something up.
    input_schema: {type: object}
    backend: webhook
    webhook:
      url: %s/lookup
`, api.URL)
	if err := os.WriteFile(catalog, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--nats-url", srv.ClientURL(), "--tools", catalog, "--id", "traced-worker")
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+otlp.URL, "OTEL_SERVICE_NAME=", "OTEL_TRACES_EXPORTER=",
		"OTEL_EXPORTER_OTLP_PROTOCOL=", "OTEL_SDK_DISABLED=")
	var logs natstest.LockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()

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
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	tp := "00-" + traceID + "-" + parentID + "-01"
	var res []envelope.Result
	natstest.Eventually(t, time.Minute, "the worker to serve lookup", func() bool {
		res, err = d.Dispatch(dispatch.WithTraceparent(ctx, tp), "s", []envelope.ToolUseBlock{
			{Type: "tool_use", ID: "toolu_traced", Name: "lookup", Input: json.RawMessage(`{}`)},
		})
		return err == nil && res[0].Code != classify.CodeUnknownTool
	})
	if res[0].IsError {
		t.Fatalf("result: %+v\n%s", res[0], logs.String())
	}
	mu.Lock()
	got := sent
	mu.Unlock()
	if !strings.HasPrefix(got, "00-"+traceID+"-") || got == tp {
		t.Errorf("the webhook's traceparent = %q; want a span of the worker's in trace %s", got, traceID)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the worker exited with %v after SIGTERM:\n%s", err, logs.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the worker did not exit after SIGTERM:\n%s", logs.String())
	}
	// Flushed before the exit: no waiting for the collector.
	body := otlp.all()
	rawTrace, _ := hex.DecodeString(traceID)
	rawSpan, _ := hex.DecodeString(got[36:52])
	for _, want := range [][]byte{[]byte("execute_tool lookup"), []byte("queued lookup"), []byte("toolpool-worker"),
		[]byte("traced-worker"), rawTrace, rawSpan} {
		if !bytes.Contains(body, want) {
			t.Errorf("the spans exported lack %q (%d bytes exported)\n%s", want, len(body), logs.String())
		}
	}
	if !strings.Contains(logs.String(), "tracing on") {
		t.Errorf("the worker does not log that tracing is on:\n%s", logs.String())
	}
}

// An OTLP protocol the worker cannot export with is a start-up error that
// names the variable (exit 2). In-process: the environment is the test's.
func TestWorkerRefusesGRPCTraces(t *testing.T) {
	for k, v := range map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_TRACES_EXPORTER": "", "OTEL_SDK_DISABLED": "", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": ""} {
		t.Setenv(k, v)
	}
	srv, _, _ := natstest.StartProvisioned(t)
	var out natstest.LockedBuffer
	if code := run(t.Context(), []string{"--nats-url", srv.ClientURL(), "--demo-tools"}, &out); code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc") {
		t.Errorf("the error does not name the variable:\n%s", out.String())
	}
}
