package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/proctest"
	"github.com/toolpool/toolpool/jetstream"
)

// Test passwords, passed to nats-server through the environment as the
// configuration expects.
const (
	orchPassword   = "orch-secret"
	workerPassword = "worker-secret"
	opsPassword    = "ops-secret"
)

// node is one nats-server process of a cluster; a restart is a new
// process with the same configuration and store.
type node struct {
	name    string
	client  string // host:port
	env     []string
	storage string

	mu   sync.Mutex
	proc *proctest.Proc // nil while killed
}

// cluster is three nats-server processes started from
// jetstream/server/cluster.conf.
type cluster struct {
	t     *testing.T
	nodes []*node
}

// startCluster starts three nodes and waits until JetStream answers on
// each. syncInterval is the SYNC_INTERVAL of the configuration.
func startCluster(t *testing.T, syncInterval string) *cluster {
	t.Helper()
	ports := natstest.FreePorts(t, 9)
	c := &cluster{t: t}
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("ROUTE_%d=nats://127.0.0.1:%d", i+1, ports[3+i]))
	}
	for i := range 3 {
		n := &node{
			name:    fmt.Sprintf("nats-%d", i+1),
			client:  fmt.Sprintf("127.0.0.1:%d", ports[i]),
			storage: filepath.Join(t.TempDir(), "store"),
		}
		n.env = append([]string{
			"NODE_NAME=" + n.name,
			"CLIENT_LISTEN=" + n.client,
			fmt.Sprintf("CLUSTER_LISTEN=127.0.0.1:%d", ports[3+i]),
			fmt.Sprintf("MONITOR_LISTEN=127.0.0.1:%d", ports[6+i]),
			"STORE_DIR=" + n.storage,
			"SYNC_INTERVAL=" + syncInterval,
			"ORCH_PASSWORD=" + orchPassword,
			"WORKER_PASSWORD=" + workerPassword,
			"OPS_PASSWORD=" + opsPassword,
			"SYS_PASSWORD=sys-secret",
			"PATH=" + os.Getenv("PATH"),
		}, routes...)
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		n.start(t)
	}
	nc := c.connect(t, "orchestrator", orchPassword)
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, "JetStream of the cluster to answer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := j.AccountInfo(ctx)
		return err == nil
	})
	return c
}

// start runs the node's nats-server and waits until it accepts
// connections. The test's cleanup kills it and, when the test failed,
// logs the end of its output.
func (n *node) start(t *testing.T) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.proc = proctest.Command{
		Name: n.name, Path: natsServerBin, Args: []string{"-c", filepath.Join(configDir, "cluster.conf")},
		Env: n.env, Dir: configDir, LogTail: 3000,
	}.Start(t)
	n.proc.WaitListening(n.client, 30*time.Second)
}

// kill sends SIGKILL to the node's process and reaps it.
func (n *node) kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return
	}
	n.proc.Kill()
	n.proc = nil
}

// urls is the comma-separated client URLs of every node.
func (c *cluster) urls() string {
	var us []string
	for _, n := range c.nodes {
		us = append(us, "nats://"+n.client)
	}
	return strings.Join(us, ",")
}

// connect opens a connection as user to the whole cluster, closed when the
// test ends.
func (c *cluster) connect(t *testing.T, user, password string) *nats.Conn {
	t.Helper()
	nc, err := jetstream.Connect(jetstream.ConnectOptions{
		URL: c.urls(), User: user, Password: password,
		Name: "cluster-test-" + user, Logger: natstest.Logger(t),
		ReconnectWait: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// startWorkerProc runs cmd/worker against the cluster as user with args,
// killed when the test ends.
func startWorkerProc(t *testing.T, c *cluster, user, password string, args ...string) *proctest.Proc {
	t.Helper()
	return proctest.Command{
		Name: "worker as " + user, Path: workerBin, Args: args, LogTail: 12000,
		Env: append(os.Environ(), "NATS_URL="+c.urls(), "NATS_USER="+user, "NATS_PASSWORD="+password),
	}.Start(t)
}
