package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolpool/toolpool/internal/pooltest"
)

// TestCallExportsSpans: with OTEL_EXPORTER_OTLP_ENDPOINT set, `orchestrator
// call` records its call's span and exports it over OTLP/HTTP before it
// exits; an OTLP protocol it does not speak is refused by name.
func TestCallExportsSpans(t *testing.T) {
	var posts, bytesIn atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			n, _ := io.Copy(io.Discard, r.Body)
			posts.Add(1)
			bytesIn.Add(n)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	pool := pooltest.Start(t)
	pooltest.StartServer(t, pool.Srv.ClientURL(), pool.Reg, func(c *pooltest.ServerConfig) { c.NoAnnounce = false })

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"call", "--nats-url", pool.Srv.ClientURL(), "echo", `{"text":"hi"}`}, &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Fatalf("with OTLP over gRPC asked: exit %d, %s; want 2 and the variable named", code, stderr.String())
	}

	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	stdout.Reset()
	stderr.Reset()
	if code := run(t.Context(), []string{"call", "--nats-url", pool.Srv.ClientURL(), "echo", `{"text":"hi"}`}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	if posts.Load() == 0 || bytesIn.Load() == 0 {
		t.Fatalf("the collector got %d exports (%d bytes); want the call's span exported before exit", posts.Load(), bytesIn.Load())
	}
}
