// Package e2e holds toolpool's end-to-end acceptance tests. It has no code
// of its own: the tests, in package e2e_test, run the whole pipeline
// (dispatcher, JetStream streams and consumers, workers, the orchestrator
// and worker binaries) against real nats-servers embedded in the test
// process, each on a free loopback port with its store in a temporary
// directory.
//
// Run them with the race detector:
//
//	go test -race -count=1 ./e2e/
//
// TestMain builds cmd/orchestrator, cmd/worker and the pinned nats-server
// once per run for the process-level tests (SIGTERM drain, the CLI, and
// the budgets, result cache and approvals across two replicas of
// policy_test.go, which run every part as a process of its own).
package e2e
