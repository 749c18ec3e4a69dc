// Package health serves the liveness and readiness probes of the toolpool
// binaries: GET /healthz answers 200 while the process runs and its
// liveness checks hold (NATSNotClosed: 503 once the connection is closed for
// good); GET /readyz answers 200 only while every check holds — NATS
// connected, the streams present, the store taking a write (StoreWritable)
// and, for a worker, its consumers bound — and 503 with what is missing
// otherwise. Readiness follows NATS: it fails while the server is away and
// comes back when the connection does.
//
//	mux := http.NewServeMux()
//	health.New(0,
//		health.NATSConnected(nc),
//		health.Streams(js),
//		health.Consumers(js, reg.Names()),
//	).WithLiveness(health.NATSNotClosed(nc)).Register(mux)
//
// A probe answers JSON such as
//
//	{"status":"not ready","checks":{"nats":"not connected to NATS (RECONNECTING)","streams":"skipped"}}
package health
