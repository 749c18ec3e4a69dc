package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
)

// Test passwords, passed to nats-server through the environment as the
// configuration expects.
const (
	orchPassword   = "orch-secret"
	workerPassword = "worker-secret"
	opsPassword    = "ops-secret"
)

// node is one nats-server process of a cluster.
type node struct {
	name    string
	client  string // host:port
	env     []string
	storage string

	mu  sync.Mutex
	cmd *exec.Cmd
	out *lockedBuffer
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
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.kill()
		}
		if t.Failed() {
			for _, n := range c.nodes {
				t.Logf("--- %s log (tail)\n%s", n.name, tail(n.out.String(), 3000))
			}
		}
	})
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

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// start runs the node's nats-server and waits until it accepts connections.
func (n *node) start(t *testing.T) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.out == nil {
		n.out = &lockedBuffer{}
	}
	cmd := exec.Command(natsServerBin, "-c", filepath.Join(configDir, "cluster.conf"))
	cmd.Dir = configDir
	cmd.Env = n.env
	cmd.Stdout = n.out
	cmd.Stderr = n.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", n.name, err)
	}
	n.cmd = cmd
	natstest.Eventually(t, 30*time.Second, n.name+" to accept connections", func() bool {
		conn, err := net.DialTimeout("tcp", n.client, time.Second)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	})
}

// kill sends SIGKILL to the node's process and reaps it.
func (n *node) kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	_ = n.cmd.Wait()
	n.cmd = nil
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

// workerProc is a cmd/worker process.
type workerProc struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error
}

// startWorkerProc runs cmd/worker against the cluster as user with args,
// killed when the test ends.
func startWorkerProc(t *testing.T, c *cluster, user, password string, args ...string) *workerProc {
	t.Helper()
	cmd := exec.Command(workerBin, args...)
	cmd.Env = append(os.Environ(), "NATS_URL="+c.urls(), "NATS_USER="+user, "NATS_PASSWORD="+password)
	p := &workerProc{cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout = p.out
	cmd.Stderr = p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- worker %d output (tail)\n%s", cmd.Process.Pid, tail(p.out.String(), 12000))
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to end.
func (p *workerProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes and reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
