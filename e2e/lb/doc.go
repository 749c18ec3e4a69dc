// Package lb tests toolpool's replicas behind a real load balancer: one
// nats-server process with JetStream, two `orchestrator serve --nats-url`
// replicas on it, worker processes (cmd/worker) serving an exec tool that
// logs each of its executions, and HAProxy (Debian's haproxy package) in
// HTTP mode with `balance roundrobin` and no stickiness in front of both
// replicas, every listener on a free loopback port.
//
// The tests send HTTP tool calls, MCP requests (the go-sdk client, the
// TypeScript SDK and the MCP Inspector CLI) and, while one replica is
// killed with SIGKILL, async calls and MCP tasks through the proxy, and
// check from HAProxy's log and the replicas' metrics which replica
// answered each request.
//
// TestMain builds nats-server (the version pinned in go.mod),
// cmd/orchestrator and cmd/worker once (internal/testbin). The tests need
// haproxy on PATH (or in /usr/sbin) and, for the Node.js clients, e2e's
// npm packages, which internal/testdeps installs from the lockfile when
// missing; in CI (CI=true) a missing haproxy is installed or fails the
// tests, elsewhere it skips them.
package lb
