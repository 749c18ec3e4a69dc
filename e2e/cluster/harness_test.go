package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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
	monitor string // host:port of the HTTP monitoring endpoints
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
	mon   *http.Client // for the nodes' monitoring endpoints
}

// startCluster starts three nodes and waits until the meta group has all
// three as current peers and JetStream answers. syncInterval is the
// SYNC_INTERVAL of the configuration.
func startCluster(t *testing.T, syncInterval string) *cluster {
	t.Helper()
	ports := natstest.FreePorts(t, 9)
	// No kept-alive connections: nothing of the client outlives the test
	// (TestMain looks for leaked goroutines).
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	c := &cluster{t: t, mon: &http.Client{Transport: tr, Timeout: 2 * time.Second}}
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("ROUTE_%d=nats://127.0.0.1:%d", i+1, ports[3+i]))
	}
	for i := range 3 {
		n := &node{
			name:    fmt.Sprintf("nats-%d", i+1),
			client:  fmt.Sprintf("127.0.0.1:%d", ports[i]),
			monitor: fmt.Sprintf("127.0.0.1:%d", ports[6+i]),
			storage: filepath.Join(t.TempDir(), "store"),
		}
		n.env = append([]string{
			"NODE_NAME=" + n.name,
			"CLIENT_LISTEN=" + n.client,
			fmt.Sprintf("CLUSTER_LISTEN=127.0.0.1:%d", ports[3+i]),
			"MONITOR_LISTEN=" + n.monitor,
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
	c.waitMetaGroup(t, 60*time.Second)
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
	n.launch(t).WaitListening(n.client, 30*time.Second)
}

// launch runs the node's nats-server without waiting for anything, as
// start does; it may be called from a goroutine other than the test's
// (it fails the test only when the program cannot be started). The test
// waits for the process with the Proc's methods.
func (n *node) launch(t *testing.T) *proctest.Proc {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.proc = proctest.Command{
		Name: n.name, Path: natsServerBin, Args: []string{"-c", filepath.Join(configDir, "cluster.conf")},
		Env: n.env, Dir: configDir, LogTail: 3000,
	}.Start(t)
	return n.proc
}

// running is the node's process, nil while it is killed.
func (n *node) running() *proctest.Proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
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

// waitMetaGroup waits up to limit until the JetStream meta group is
// complete: a node reports itself its leader, and in its view the group
// has three members, the two others named, online and current. A leader
// elected by two nodes answers the JetStream API before the third has
// joined, and would then refuse to place three replicas.
func (c *cluster) waitMetaGroup(t *testing.T, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := c.metaGroup()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the JetStream meta group is not complete after %v: %v", limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metaGroup is nil when the meta leader's view of the meta group has
// every node current, else what is missing.
func (c *cluster) metaGroup() error {
	var seen []string
	for _, n := range c.nodes {
		var info server.JSInfo
		if err := c.getJSON(n, "/jsz", &info); err != nil {
			seen = append(seen, fmt.Sprintf("%s: %v", n.name, err))
			continue
		}
		switch m := info.Meta; {
		case m == nil || m.Leader == "":
			seen = append(seen, n.name+": no meta leader")
		case m.Leader != n.name:
			seen = append(seen, n.name+": meta leader "+m.Leader)
		default:
			return c.metaComplete(n.name, m)
		}
	}
	return fmt.Errorf("no node reports itself the meta leader (%s)", strings.Join(seen, "; "))
}

// metaComplete is nil when m, the meta group as its leader (the node
// named leader) sees it, has every node of the cluster as a current
// member, else what is missing.
func (c *cluster) metaComplete(leader string, m *server.MetaClusterInfo) error {
	listed := map[string]bool{leader: true}
	var problems []string
	for _, r := range m.Replicas {
		listed[r.Name] = true
		switch {
		case r.Offline:
			problems = append(problems, r.Name+" offline")
		case !r.Current:
			problems = append(problems, r.Name+" not current")
		}
	}
	for _, n := range c.nodes {
		if !listed[n.name] {
			problems = append(problems, n.name+" not a member")
		}
	}
	if m.Size != len(c.nodes) {
		problems = append(problems, fmt.Sprintf("cluster size %d", m.Size))
	}
	if len(problems) > 0 {
		return fmt.Errorf("meta leader %s: %s", leader, strings.Join(problems, ", "))
	}
	return nil
}

// getJSON decodes the answer of n's monitoring endpoint path into v.
func (c *cluster) getJSON(n *node, path string, v any) error {
	resp, err := c.mon.Get("http://" + n.monitor + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// untilRefused connects as user and returns a JetStream on that connection
// with a context that ends at limit, or as soon as the server reports a
// permissions violation on the connection (its cause, context.Cause, is
// that violation). A refused request gets no answer: the server drops it
// and tells the connection asynchronously, so a check that an operation
// is refused ends with the refusal instead of waiting out its own
// timeout, and an operation that is allowed still completes. The
// violation ends every request on the connection: use one per operation
// checked.
func (c *cluster) untilRefused(t *testing.T, user, password string, limit time.Duration) (js.JetStream, context.Context) {
	t.Helper()
	refused, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	ctx, cancelLimit := context.WithTimeout(refused, limit)
	t.Cleanup(cancelLimit)
	nc, err := nats.Connect(c.urls(), nats.UserInfo(user, password),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				cancel(err)
			}
		}))
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return j, ctx
}
