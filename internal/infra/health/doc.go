// Package health serves the liveness and readiness probes of the toolpool
// binaries: GET /healthz answers 200 while the process runs and its
// liveness checks hold (NATSNotClosed: 503 once the connection is closed for
// good); GET /readyz answers 200 only while every check holds — NATS
// connected, the streams present, the store taking a write (StoreWritable)
// and, for a worker, its consumers bound — and 503 with what is missing
// otherwise. Readiness follows NATS: it fails while the server is away and
// comes back when the connection does.
//
// The checks that need JetStream's API (Streams, StoreWritable, Consumers)
// are meant to be wrapped in Background: they then run at most every
// RefreshDefault (5 s) out of the probes' way, and a probe answers at once
// from their last results, however often a load balancer probes. The
// local checks (NATSConnected, Flag) run at each probe.
//
//	mux := http.NewServeMux()
//	health.New(0,
//		health.NATSConnected(nc),
//		health.Background(health.Streams(js), 0),
//		health.Background(health.Consumers(js, reg.Names()), 0),
//	).WithLiveness(health.NATSNotClosed(nc)).Register(mux)
//
// A probe answers JSON such as
//
//	{"status":"not ready","checks":{"nats":"not connected to NATS (RECONNECTING)","streams":"skipped"}}
//	{"status":"ready","checks":{"nats":"ok","streams":"ok"},"age_seconds":{"streams":1.2}}
package health
