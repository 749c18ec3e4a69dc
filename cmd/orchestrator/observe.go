package main

import (
	"log/slog"
	"net/http"

	js "github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolpool/toolpool/pkg/metrics"
)

// serveMetrics are the orchestrator's metrics, served on GET /metrics of
// its HTTP server: its dispatcher's, its HTTP server's, its in-process
// workers' (one set for all of them), the pool's state read from
// JetStream at scrape time, and the Go runtime and process.
type serveMetrics struct {
	reg      *prometheus.Registry
	worker   *metrics.Worker // set by addWorkers
	dispatch *metrics.Dispatch
	http     *metrics.HTTP
	front    *metrics.Front
}

func newServeMetrics(j js.JetStream, log *slog.Logger) (*serveMetrics, error) {
	m := &serveMetrics{reg: metrics.NewRegistry()}
	var err error
	if m.dispatch, err = metrics.NewDispatch(m.reg, metrics.DispatchOptions{}); err != nil {
		return nil, err
	}
	if m.http, err = metrics.NewHTTP(m.reg); err != nil {
		return nil, err
	}
	if m.front, err = metrics.NewFront(m.reg); err != nil {
		return nil, err
	}
	if err := m.reg.Register(metrics.NewJetStreamCollector(j, metrics.JetStreamOptions{Logger: log})); err != nil {
		return nil, err
	}
	return m, nil
}

// addWorkers creates the metrics of the in-process workers, which serve
// tools (one set for all of them).
func (m *serveMetrics) addWorkers(tools []string) error {
	w, err := metrics.NewWorker(m.reg, metrics.WorkerOptions{Tools: tools})
	if err != nil {
		return err
	}
	m.worker = w
	return nil
}

// handler adds GET /metrics to mux and returns mux counted by route.
func (m *serveMetrics) handler(mux *http.ServeMux) http.Handler {
	mux.Handle("GET /metrics", metrics.Handler(m.reg))
	return m.http.Wrap(mux)
}
