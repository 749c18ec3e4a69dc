package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/testbin"
	"github.com/toolpool/toolpool/jetstream"
)

// The deployment's users the bench can connect as, and the one it adds.
const (
	userBench        = "bench"
	userOrchestrator = "orchestrator"
	userWorker       = "worker"
)

// binaries are the built programs.
type binaries struct{ natsServer, worker string }

// build builds nats-server (pinned in go.mod) and cmd/worker into dir,
// without the race detector.
func build(dir string) (binaries, error) {
	if err := testbin.Build(dir, testbin.NATSServer, "./cmd/worker"); err != nil {
		return binaries{}, err
	}
	return binaries{filepath.Join(dir, "nats-server"), filepath.Join(dir, "worker")}, nil
}

// proc is a child process with its log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// startProc starts path with args and env, its output in dir/name.log.
func startProc(dir, name, path string, args, env []string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(path, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr, cmd.Dir = env, f, f, dir
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// pid is the process's id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM and waits up to grace, then kills the process.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited is an error naming the process and the end of its log when it
// has ended, nil while it runs.
func (p *proc) exited() error {
	select {
	case <-p.done:
	default:
		return nil
	}
	b, _ := os.ReadFile(p.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return fmt.Errorf("%s ended (%v):\n%s", p.name, p.err, b)
}

// node is one nats-server of the cluster.
type node struct {
	*proc
	client, monitor, prof string // host:port
}

// cluster is three nats-server processes started from the deployment's
// cluster.conf.
type cluster struct {
	dir       string
	nodes     []*node
	passwords map[string]string // by user
	nc        *nats.Conn        // the setup connection, as the bench user
	js        js.JetStream
}

// startCluster writes the configuration into dir, starts three nodes and
// waits until JetStream answers.
func startCluster(ctx context.Context, dir string, bins binaries, syncInterval string) (_ *cluster, err error) {
	confDir := filepath.Join(dir, "conf")
	if err := writeConfig(confDir); err != nil {
		return nil, err
	}
	ports, err := freePorts(12)
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir, passwords: map[string]string{}}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	env := []string{"PATH=" + os.Getenv("PATH"), "SYNC_INTERVAL=" + syncInterval}
	for user, v := range map[string]string{userOrchestrator: "ORCH", userWorker: "WORKER", "ops": "OPS", "sys": "SYS", userBench: "BENCH"} {
		c.passwords[user] = randomPassword()
		env = append(env, v+"_PASSWORD="+c.passwords[user])
	}
	for i := range 3 {
		env = append(env, fmt.Sprintf("ROUTE_%d=nats://127.0.0.1:%d", i+1, ports[3+i]))
	}
	for i := range 3 {
		n := &node{client: fmt.Sprintf("127.0.0.1:%d", ports[i]), monitor: fmt.Sprintf("127.0.0.1:%d", ports[6+i]),
			prof: fmt.Sprintf("127.0.0.1:%d", ports[9+i])}
		name := fmt.Sprintf("nats-%d", i+1)
		nodeEnv := append([]string{
			"NODE_NAME=" + name, "CLIENT_LISTEN=" + n.client, "MONITOR_LISTEN=" + n.monitor,
			fmt.Sprintf("CLUSTER_LISTEN=127.0.0.1:%d", ports[3+i]),
			"STORE_DIR=" + filepath.Join(dir, name+"-store"), fmt.Sprintf("PROF_PORT=%d", ports[9+i]),
		}, env...)
		if n.proc, err = startProc(dir, name, bins.natsServer, []string{"-c", filepath.Join(confDir, "cluster.conf")}, nodeEnv); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if err := n.waitListening(ctx); err != nil {
			return nil, err
		}
	}
	if c.nc, err = c.connect(userBench, "toolpool-cluster-bench"); err != nil {
		return nil, err
	}
	if c.js, err = js.New(c.nc); err != nil {
		return nil, err
	}
	return c, c.waitJetStream(ctx)
}

// waitJetStream waits until the cluster's JetStream answers (a meta
// leader is elected), up to a minute.
func (c *cluster) waitJetStream(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		for _, n := range c.nodes {
			if err := n.exited(); err != nil {
				return err
			}
		}
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.js.AccountInfo(actx)
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("the cluster's JetStream did not answer within a minute: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitListening waits until the node accepts connections, up to 30 s.
func (n *node) waitListening(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", n.client, time.Second)
		if err == nil {
			return conn.Close()
		}
		if err := n.exited(); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not accept connections on %s after 30 s: %w", n.name, n.client, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// urls is the client URLs of every node.
func (c *cluster) urls() string {
	var us []string
	for _, n := range c.nodes {
		us = append(us, "nats://"+n.client)
	}
	return strings.Join(us, ",")
}

// connect opens a connection to the cluster as user.
func (c *cluster) connect(user, name string) (*nats.Conn, error) {
	return c.connectTo(c.urls(), user, name)
}

// connectTo opens a connection to the nodes at urls as user.
func (c *cluster) connectTo(urls, user, name string) (*nats.Conn, error) {
	return jetstream.Connect(jetstream.ConnectOptions{
		URL: urls, User: user, Password: c.passwords[user], Name: name,
		Logger: quietLogger(), ReconnectWait: 100 * time.Millisecond,
	})
}

// stop closes the setup connection and stops the nodes.
func (c *cluster) stop() {
	if c.nc != nil {
		c.nc.Close()
	}
	for _, n := range c.nodes {
		n.stop(10 * time.Second)
	}
}

// writeConfig copies the deployment's cluster.conf into dir (with the
// profiling port added), and its
// accounts.conf with one more user in the toolpool account: the bench's,
// without permissions (the baseline's streams are not the pool's).
func writeConfig(dir string) error {
	root, err := testbin.ModuleRoot()
	if err != nil {
		return err
	}
	src := filepath.Join(root, "jetstream", "server")
	clusterConf, err := os.ReadFile(filepath.Join(src, "cluster.conf"))
	if err != nil {
		return err
	}
	accounts, err := os.ReadFile(filepath.Join(src, "accounts.conf"))
	if err != nil {
		return err
	}
	const anchor = "TOOLPOOL: {\n    jetstream: enabled\n    users: [\n"
	i := strings.Index(string(accounts), anchor)
	if i < 0 {
		return errors.New("accounts.conf: the toolpool account's user list was not found where expected; update writeConfig")
	}
	i += len(anchor)
	withBench := string(accounts[:i]) + "      { user: " + userBench + ", password: $BENCH_PASSWORD }\n" + string(accounts[i:])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The servers' pprof endpoints, for --server-profiles (loopback).
	clusterConf = append(clusterConf, "\nprof_port: $PROF_PORT\n"...)
	if err := os.WriteFile(filepath.Join(dir, "cluster.conf"), clusterConf, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "accounts.conf"), []byte(withBench), 0o644)
}

// freePorts returns n loopback ports free at the time of the call.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomPassword() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
