// Package metrics exposes toolpool to Prometheus. It implements the
// metrics hooks of the core packages — worker.Metrics (Worker) and
// dispatch.Metrics (Dispatch) — which themselves import no metrics
// library; counts HTTP requests by route pattern (HTTP); and reads the
// queue state from JetStream at scrape time (JetStreamCollector). Every
// name starts with toolpool_, durations are histograms in seconds, and
// label values are bounded: tools come from the registry or catalog, an
// unknown name is labelled _unknown, nothing is labelled per call or per
// session. docs/observability.md lists every metric.
//
// Each process builds its own registry (tests build several):
//
//	reg := metrics.NewRegistry() // Go runtime and process collectors
//	wm, err := metrics.NewWorker(reg, metrics.WorkerOptions{Tools: registry.Names()})
//	if err != nil { … }
//	w, err := worker.New(worker.Config{…, Metrics: wm})
//	…
//	mux.Handle("GET /metrics", metrics.Handler(reg))
//
// An orchestrator adds Dispatch (as dispatch.Config.Metrics), HTTP (Wrap
// around its mux) and one JetStreamCollector:
//
//	reg.MustRegister(metrics.NewJetStreamCollector(js, metrics.JetStreamOptions{}))
package metrics
