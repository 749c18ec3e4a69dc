// Package cluster tests toolpool on a three-node JetStream cluster of real
// nats-server processes, configured with the files in jetstream/server
// (cluster.conf and its least-privilege accounts): streams at three
// replicas, the stream leader killed with SIGKILL under load, the node
// holding the dispatcher's result consumer killed under load, a worker
// process killed under load, and workers whose credentials do not allow
// what they try.
//
// TestMain builds nats-server (the version pinned in go.mod) and
// cmd/worker once; the tests need nothing else.
//
// The command in ./bench measures the pool against raw JetStream on such
// a cluster, with one and two worker processes:
//
//	go run ./e2e/cluster/bench
package cluster
