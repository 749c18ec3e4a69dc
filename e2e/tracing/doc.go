// Package tracing is toolpool's tracing suite: the pool as separate
// processes (`orchestrator serve --workers 0` with its embedded NATS
// server, and `worker` processes serving a catalog) exporting their spans
// over OTLP to a real Jaeger that the test starts, and assertions on the
// traces read back through Jaeger's query API.
//
// TestTraceAcrossWorkers runs one call to a webhook tool whose service
// fails the first request: attempt 1 fails on worker A, A is stopped,
// attempt 2 succeeds on worker B, and Jaeger must hold one trace with the
// orchestrator's request and call spans and two execute_tool spans from
// the two worker processes. It also renders the trace as a waterfall
// screenshot for docs/observability.md.
//
// Jaeger is built from e2e/jaeger (a module of its own) by
// e2e/jaeger/build.sh, which prints the binary's path; the tests take it
// from TOOLPOOL_JAEGER or build.sh's default cache path. Without it they
// skip, naming the command, except in CI (CI=true), where they fail.
// TestMain builds cmd/orchestrator and cmd/worker once, without the race
// detector, into a temporary directory.
//
//	e2e/jaeger/build.sh && go test -race -count=1 -v ./e2e/tracing/
package tracing
