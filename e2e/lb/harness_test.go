package lb_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/proctest"
	"github.com/toolpool/toolpool/internal/testdeps"
)

// waitLong bounds every wait for something that should happen: generous,
// because the machine is shared.
const waitLong = 60 * time.Second

// napTool is the workers' catalog tool: an exec tool that appends
// "<marker> <worker>" to the test's execution log, sleeps $NAP_SECONDS
// and prints "napped <marker>".
const napTool = "nap"

// replicaHeader is the response header HAProxy adds: the name of the
// replica (its server line) that answered.
const replicaHeader = "Toolpool-Lb-Replica"

// replica is one `orchestrator serve` process behind the proxy.
type replica struct {
	name string // the proxy's server name and the orchestrator's --instance
	addr string // its own HTTP address, host:port
	cmd  proctest.Command
	proc *proctest.Proc // nil once killed
}

// stack is the whole system as processes: nats-server, two replicas,
// the workers and HAProxy in front of the replicas.
type stack struct {
	t        *testing.T
	dir      string
	natsURL  string
	replicas []*replica
	workers  []*proctest.Proc
	lb       *proctest.Proc
	lbURL    string // http://host:port of the proxy
	execLog  string // the tool's one line per execution
	client   *http.Client
}

// stackConfig shapes a stack.
type stackConfig struct {
	workers     int     // worker processes
	concurrency int     // each worker's --concurrency
	napSeconds  float64 // how long each execution of the tool sleeps
	// asyncLease, when not zero, is the replicas' --async-lease: how
	// long after a dead replica's last lease refresh another adopts its
	// async calls and MCP tasks (15 s by default).
	asyncLease time.Duration
}

// startStack starts nats-server, two replicas, the workers and HAProxy,
// and waits until the tool is announced by every worker and the proxy
// sees both replicas up. Everything is killed when the test ends.
func startStack(t *testing.T, cfg stackConfig) *stack {
	t.Helper()
	haproxy := findHAProxy(t)
	dir := t.TempDir()
	ports := natstest.FreePorts(t, 4)
	s := &stack{
		t: t, dir: dir,
		natsURL: fmt.Sprintf("nats://127.0.0.1:%d", ports[0]),
		lbURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[3]),
		execLog: filepath.Join(dir, "executions.log"),
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	s.client = &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}

	nats := proctest.Command{
		Name: "nats-server", Path: natsServerBin, Dir: dir, Env: base, LogTail: 4000,
		Args: []string{"--jetstream", "--store_dir", filepath.Join(dir, "jetstream"), "--addr", "127.0.0.1",
			"--port", strconv.Itoa(ports[0]), "--server_name", "lb"},
	}.Start(t)
	nats.Eventually(waitLong, "JetStream to answer", func() bool { return jsAnswers(s.natsURL) })

	for i := range 2 {
		r := &replica{name: fmt.Sprintf("r%d", i+1), addr: fmt.Sprintf("127.0.0.1:%d", ports[1+i])}
		args := []string{"serve", "--nats-url", s.natsURL, "--workers", "0", "--http", r.addr,
			"--instance", r.name, "--drain-timeout", "5s", "--http-drain-timeout", "5s"}
		if cfg.asyncLease != 0 {
			args = append(args, "--async-lease", cfg.asyncLease.String())
		}
		r.cmd = proctest.Command{
			Name: "replica " + r.name, Path: orchestratorBin, Dir: t.TempDir(), Env: base, LogTail: 8000, Args: args,
		}
		s.replicas = append(s.replicas, r)
	}
	// The first replica provisions the streams; the second starts once it
	// is ready, so that they do not race to create them.
	for _, r := range s.replicas {
		r.proc = r.cmd.Start(t)
		r.proc.WaitHTTP("http://"+r.addr+"/readyz", waitLong)
	}

	cat := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(cat, []byte(catalog()), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range cfg.workers {
		id := fmt.Sprintf("w%d", i+1)
		w := proctest.Command{
			Name: "worker " + id, Path: workerBin, Dir: t.TempDir(), LogTail: 6000,
			Env: append(base, "NAP_LOG="+s.execLog, "NAP_WORKER="+id,
				"NAP_SECONDS="+strconv.FormatFloat(cfg.napSeconds, 'f', -1, 64)),
			Args: []string{"--nats-url", s.natsURL, "--tools", cat, "--builtin-tools=none", "--id", id,
				"--concurrency", strconv.Itoa(cfg.concurrency)},
		}.Start(t)
		s.workers = append(s.workers, w)
	}
	for i := range s.workers {
		s.waitAnnounced(fmt.Sprintf("w%d", i+1))
	}
	s.startProxy(haproxy, ports[3])
	return s
}

// catalog is the workers' tool catalog. The tool reads the input JSON on
// stdin, appends "<marker> <worker>" to $NAP_LOG (O_APPEND: one write per
// line, so lines of concurrent executions do not mix), sleeps
// $NAP_SECONDS and prints "napped <marker>". The shell only parses the
// marker (the input never reaches a command line).
func catalog() string {
	script := `in=; while IFS= read -r l || [ -n "$l" ]; do in="$in$l"; done; ` +
		`m=${in#*\"marker\"}; m=${m#*\"}; m=${m%%\"*}; ` +
		`printf '%s %s\n' "$m" "$NAP_WORKER" >> "$NAP_LOG"; ` +
		`sleep "$NAP_SECONDS"; printf 'napped %s' "$m"`
	return fmt.Sprintf(`version: 1
tools:
  - name: %s
    description: Records one execution of the call in the test's log, sleeps a while and returns the call's marker.
    input_schema:
      type: object
      properties:
        marker: {type: string, minLength: 1, maxLength: 64, pattern: "^[A-Za-z0-9_-]+$"}
      required: [marker]
      additionalProperties: false
    timeout: 2m
    idempotent: true
    backend: exec
    exec:
      command: [sh, -c, %q]
      env: [NAP_LOG, NAP_WORKER, NAP_SECONDS]
`, napTool, script)
}

// haproxyConfig is HAProxy's configuration: HTTP mode, round robin over
// both replicas without stickiness (every request is balanced on its
// own, kept-alive connections included); health checks on /readyz every
// 500 ms with 3 s to answer, a replica out after 3 failures (under load
// a live replica's /readyz took more than 300 ms, and once answered 503
// after 2.7 s: a tighter check took live replicas out; a dead one refuses
// the connection at once); a request whose connection to a replica fails
// goes to the other (redispatch); each answer names its replica in
// replicaHeader, and one log line per request goes to stdout: "lb
// <replica> <method> <uri> <status>".
func (s *stack) haproxyConfig(port int) string {
	var servers strings.Builder
	for _, r := range s.replicas {
		fmt.Fprintf(&servers, "    server %s %s check inter 500ms fall 3 rise 2\n", r.name, r.addr)
	}
	return fmt.Sprintf(`global
    log stdout format raw local0
    maxconn 2000

defaults
    mode http
    log global
    option dontlognull
    log-format "lb %%s %%HM %%HU %%ST"
    option redispatch
    retries 3
    timeout connect 2s
    timeout client 5m
    timeout server 5m
    timeout http-request 30s
    timeout http-keep-alive 30s
    timeout check 3s

frontend agents
    bind 127.0.0.1:%d
    default_backend replicas

backend replicas
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host 127.0.0.1
    http-response set-header %s %%[srv_name]
%s`, port, replicaHeader, servers.String())
}

// startProxy writes HAProxy's configuration, checks it, starts HAProxy in
// the foreground and waits until it routes to both replicas.
func (s *stack) startProxy(haproxy string, port int) {
	s.t.Helper()
	cfg := filepath.Join(s.dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(s.haproxyConfig(port)), 0o644); err != nil {
		s.t.Fatal(err)
	}
	if out, err := exec.Command(haproxy, "-c", "-f", cfg).CombinedOutput(); err != nil {
		s.t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	s.lb = proctest.Command{Name: "haproxy", Path: haproxy, Args: []string{"-db", "-f", cfg}, Dir: s.dir, LogTail: 8000}.Start(s.t)
	s.lb.WaitListening(strings.TrimPrefix(s.lbURL, "http://"), waitLong)
	s.waitProxyRoutes(len(s.replicas))
}

// waitProxyRoutes waits until GET /readyz through the proxy has been
// answered by n distinct replicas (their health checks passed).
func (s *stack) waitProxyRoutes(n int) {
	s.t.Helper()
	seen := map[string]bool{}
	s.lb.Eventually(waitLong, fmt.Sprintf("the proxy to route to %d replicas", n), func() bool {
		resp, err := s.client.Get(s.lbURL + "/readyz")
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			seen[resp.Header.Get(replicaHeader)] = true
		}
		return len(seen) >= n
	})
}

// findHAProxy returns the haproxy program (on PATH, or in /usr/sbin,
// which a user's PATH may lack): testdeps.HAProxy, installed in CI when
// missing, skipping the test elsewhere.
func findHAProxy(t *testing.T) string {
	t.Helper()
	return testdeps.HAProxy.Path(t)
}

// jsAnswers reports whether JetStream answers at url.
func jsAnswers(url string) bool {
	ok := false
	natstest.WithJS(url, func(ctx context.Context, j js.JetStream) {
		_, err := j.AccountInfo(ctx)
		ok = err == nil
	})
	return ok
}

// waitAnnounced waits until worker id has announced the tool.
func (s *stack) waitAnnounced(id string) {
	s.t.Helper()
	natstest.Eventually(s.t, waitLong, "the tool announced by "+id, func() bool {
		ok := false
		natstest.WithJS(s.natsURL, func(ctx context.Context, j js.JetStream) {
			kv, err := j.KeyValue(ctx, discovery.BucketDefault)
			if err != nil {
				return
			}
			_, err = kv.Get(ctx, discovery.Key(napTool, id))
			ok = err == nil
		})
		return ok
	})
}

// kill sends SIGKILL to replica r and reaps it.
func (s *stack) kill(r *replica) {
	if r.proc == nil {
		return
	}
	r.proc.Kill()
	r.proc = nil
}

// proxyLog is HAProxy's log so far: per line, the replica that answered
// ("<NOSRV>" for none), the method, the URI and the status.
type proxyLine struct {
	replica, method, uri string
	status               int
}

// proxyLog parses HAProxy's log lines.
func (s *stack) proxyLog() []proxyLine {
	var lines []proxyLine
	sc := bufio.NewScanner(strings.NewReader(s.lb.Output()))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 5 || f[0] != "lb" {
			continue
		}
		code, _ := strconv.Atoi(f[4])
		lines = append(lines, proxyLine{replica: f[1], method: f[2], uri: f[3], status: code})
	}
	return lines
}

// routeCounts is, per replica, how many requests with method and a path
// beginning with prefix the proxy logged (health checks are not logged).
func (s *stack) routeCounts(method, prefix string) map[string]int {
	n := map[string]int{}
	for _, l := range s.proxyLog() {
		if l.method == method && strings.HasPrefix(l.uri, prefix) {
			n[l.replica]++
		}
	}
	return n
}

// waitLogged waits until the proxy's log counts, per replica, want
// requests with method and a path beginning with prefix (it writes its
// log line once the answer is sent, so the last may come a little after
// the client read it), and fails the test if it logs others.
func (s *stack) waitLogged(method, prefix string, want map[string]int) {
	s.t.Helper()
	var got map[string]int
	s.lb.Eventually(waitLong, fmt.Sprintf("the proxy to log %v requests %s %s", want, method, prefix), func() bool {
		got = s.routeCounts(method, prefix)
		for r, n := range want {
			if got[r] < n {
				return false
			}
		}
		return true
	})
	for r, n := range got {
		if n != want[r] {
			s.t.Errorf("the proxy logged %d requests %s %s to %s, the clients saw %d", n, method, prefix, r, want[r])
		}
	}
}

// metric is the sum of the samples of the counter name, in replica r's
// own /metrics, whose labels include every one of labels (`key="value"`).
func (s *stack) metric(r *replica, name string, labels ...string) float64 {
	s.t.Helper()
	resp, err := s.client.Get("http://" + r.addr + "/metrics")
	if err != nil {
		s.t.Fatalf("metrics of %s: %v", r.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("metrics of %s: %v", r.name, err)
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(line, l)
		}
		if !all {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// executions reads the tool's log: per marker, the workers that ran it.
func (s *stack) executions() map[string][]string {
	s.t.Helper()
	per := map[string][]string{}
	data, err := os.ReadFile(s.execLog)
	if errors.Is(err, os.ErrNotExist) {
		return per
	}
	if err != nil {
		s.t.Fatal(err)
	}
	// Read while the tools run: the shell creates the file before its
	// line is written, and a line may be half written. Only whole lines
	// count; the last one, without its newline yet, is read next time.
	for line := range strings.Lines(string(data)) {
		line, whole := strings.CutSuffix(line, "\n")
		if !whole {
			break
		}
		marker, worker, ok := strings.Cut(line, " ")
		if !ok {
			s.t.Errorf("execution log line %q is not \"<marker> <worker>\"", line)
			continue
		}
		per[marker] = append(per[marker], worker)
	}
	return per
}

// summary collects the rows of the table TestMain prints.
var summary proctest.Rows

// tableHeader heads summary's table.
const tableHeader = "| test | calls | results | lost | duplicated results | duplicate executions | time to complete |\n" +
	"|---|---|---|---|---|---|---|\n"
