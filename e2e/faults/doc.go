// Package faults is toolpool's fault-injection suite: the whole pool as
// separate processes (a nats-server with JetStream, `orchestrator serve
// --workers 0`, three `worker` processes serving a catalog), agents
// posting tool calls over the HTTP API, and one fault per test under that
// load: a worker killed with SIGKILL, the orchestrator killed with SIGKILL
// and restarted, the nats-server stopped with SIGTERM or killed with
// SIGKILL and restarted on the same store and port.
//
// The tool the workers serve is an exec-backend catalog tool that appends
// one line per execution to a file of the test, so executions are counted
// by the tool itself, not by a worker's metrics (which die with it). Each
// test reports calls sent, results received, lost and duplicated results,
// duplicate executions and the longest stall; docs/reliability.md holds
// the table.
//
// TestMain builds nats-server (the version pinned in go.mod),
// cmd/orchestrator and cmd/worker once, without the race detector, into a
// temporary directory.
//
//	go test -race -count=1 -v ./e2e/faults/
package faults
