package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/pkg/health"
	"github.com/toolpool/toolpool/pkg/metrics"
	"github.com/toolpool/toolpool/pkg/worker"
)

// observability is the worker's --metrics server: GET /metrics (the
// worker's metrics, Go runtime and process), GET /healthz (503 once the NATS
// connection is closed for good) and GET /readyz (NATS connected, streams
// present, this worker's consumers bound, and the worker started and not
// draining).
type observability struct {
	metrics *metrics.Worker // nil without --metrics
	ready   atomic.Bool
	srv     *http.Server
	log     *slog.Logger
}

// startObservability serves on addr; with an empty addr it serves nothing
// and its methods do nothing.
func startObservability(addr string, nc *nats.Conn, j js.JetStream, tools []string, log *slog.Logger) (*observability, error) {
	o := &observability{log: log}
	if addr == "" {
		return o, nil
	}
	reg := metrics.NewRegistry()
	m, err := metrics.NewWorker(reg, metrics.WorkerOptions{Tools: tools})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(reg))
	health.New(0,
		health.NATSConnected(nc),
		health.Streams(j),
		health.Consumers(j, tools),
		health.Flag("worker", &o.ready, "the worker is starting or draining"),
	).WithLiveness(health.NATSNotClosed(nc)).Register(mux)
	o.metrics = m
	o.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := o.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server failed", "err", err)
		}
	}()
	log.Info("metrics listening", "addr", ln.Addr().String())
	return o, nil
}

// workerMetrics is the worker.Metrics to configure: nil without --metrics.
func (o *observability) workerMetrics() worker.Metrics {
	if o.metrics == nil {
		return nil
	}
	return o.metrics
}

// setReady sets what /readyz's worker check says.
func (o *observability) setReady(ready bool) { o.ready.Store(ready) }

// stop shuts the server down.
func (o *observability) stop() {
	if o.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = o.srv.Shutdown(ctx)
}
