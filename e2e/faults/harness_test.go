package faults_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
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

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
)

// waitLong bounds every wait for something that should happen: generous,
// because the machine is shared.
const waitLong = 60 * time.Second

// proc is one program of the pool, started possibly several times (a
// restart is a new incarnation with the same command line). Every
// incarnation's output is kept; the test's cleanup kills the running one
// and, when the test failed, logs the tail of each.
type proc struct {
	t    *testing.T
	name string
	bin  string
	args []string
	env  []string
	dir  string

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{}
	outs  []*lockedBuffer
	exits []string
}

// newProc prepares a program; start runs it.
func newProc(t *testing.T, name, bin string, env []string, args ...string) *proc {
	p := &proc{t: t, name: name, bin: bin, args: args, env: env, dir: t.TempDir()}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			p.mu.Lock()
			defer p.mu.Unlock()
			for i, out := range p.outs {
				exit := "running at the end"
				if i < len(p.exits) {
					exit = p.exits[i]
				}
				t.Logf("--- %s, run %d (%s): output (tail)\n%s", p.name, i+1, exit, tail(out.String(), 6000))
			}
		}
	})
	return p
}

// start runs a new incarnation; the previous one must have ended.
func (p *proc) start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		p.t.Fatalf("%s started while running", p.name)
	}
	out := &lockedBuffer{}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Dir = p.dir
	cmd.Env = p.env
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	n := len(p.outs)
	p.outs = append(p.outs, out)
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		for len(p.exits) < n {
			p.exits = append(p.exits, "?")
		}
		exit := "exited 0"
		if err != nil {
			exit = err.Error()
		}
		p.exits = append(p.exits, exit)
		p.mu.Unlock()
		close(done)
	}()
	p.cmd, p.done = cmd, done
}

// signal sends sig to the running incarnation and waits up to d for it to
// end; it fails the test if it does not.
func (p *proc) signal(sig syscall.Signal, d time.Duration) {
	p.t.Helper()
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		p.t.Fatalf("%s: not running", p.name)
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		p.t.Fatalf("%s did not exit within %v of %v", p.name, d, sig)
	}
	p.mu.Lock()
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
}

// kill ends the running incarnation, if any, with SIGKILL.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// exited reports whether the last incarnation ended by itself, and how.
func (p *proc) exited() (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false, ""
	}
	select {
	case <-p.done:
		return true, p.exits[len(p.exits)-1]
	default:
		return false, ""
	}
}

// pool is the whole system as processes: one nats-server, one
// orchestrator, the workers.
type pool struct {
	t        *testing.T
	natsAddr string // host:port of the nats-server, the same across restarts
	natsURL  string
	apiURL   string // the orchestrator's HTTP API, the same across restarts
	execLog  string // the tool's one line per execution
	nats     *proc
	orch     *proc
	workers  []*proc
}

// The catalog's tools: tally is idempotent, tallyOnce the same command
// marked idempotent: false.
const (
	tool      = "tally"
	tallyOnce = "tally_once"
)

// toolTimeout is the tool's per-attempt timeout in the catalog: long, like
// the slow tools of a real catalog, so that its consumer's AckWait (the
// timeout plus a margin) is far longer than the liveness window a dead
// worker's calls must come back within.
const toolTimeout = 5 * time.Minute

// execSleep is how long each execution takes, so that calls are in flight
// when a fault hits.
const execSleep = "0.2"

// catalog is the workers' tool catalog. Each tool reads the input JSON on
// stdin, appends "<marker> <worker>" to the file $TALLY_LOG (O_APPEND: one
// write per line, so lines of concurrent executions do not mix), sleeps,
// and prints "tallied <marker>". The shell only parses the marker (the
// input never reaches a command line).
func catalog() string {
	script := `in=; while IFS= read -r l || [ -n "$l" ]; do in="$in$l"; done; ` +
		`m=${in#*\"marker\"}; m=${m#*\"}; m=${m%%\"*}; ` +
		`printf '%s %s\n' "$m" "$TALLY_WORKER" >> "$TALLY_LOG"; ` +
		`sleep ` + execSleep + `; printf 'tallied %s' "$m"`
	entry := func(name string, idempotent bool) string {
		return fmt.Sprintf(`  - name: %s
    description: Records one execution of the call in the test's log and returns the call's marker.
    input_schema:
      type: object
      properties:
        marker: {type: string, minLength: 1}
      required: [marker]
      additionalProperties: false
    timeout: %s
    idempotent: %v
    backend: exec
    exec:
      command: [sh, -c, %q]
      env: [TALLY_LOG, TALLY_WORKER]
`, name, toolTimeout, idempotent, script)
	}
	return "version: 1\ntools:\n" + entry(tool, true) + entry(tallyOnce, false)
}

// startPool starts a nats-server, the orchestrator and workers worker
// processes, and waits until every worker has announced the tool.
func startPool(t *testing.T, workers int) *pool {
	t.Helper()
	dir := t.TempDir()
	ports := natstest.FreePorts(t, 2)
	p := &pool{
		t:        t,
		natsAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		apiURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		execLog:  filepath.Join(dir, "executions.log"),
	}
	p.natsURL = "nats://" + p.natsAddr
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	p.nats = newProc(t, "nats-server", natsServerBin, base,
		"--jetstream", "--store_dir", filepath.Join(dir, "jetstream"), "--addr", "127.0.0.1",
		"--port", fmt.Sprint(ports[0]), "--server_name", "faults")
	p.startNATS()

	p.orch = newProc(t, "orchestrator", orchestratorBin, base,
		"serve", "--nats-url", p.natsURL, "--workers", "0", "--http", strings.TrimPrefix(p.apiURL, "http://"))
	p.startOrchestrator()

	cat := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(cat, []byte(catalog()), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range workers {
		id := fmt.Sprintf("w%d", i+1)
		w := newProc(t, "worker "+id, workerBin,
			append(base, "TALLY_LOG="+p.execLog, "TALLY_WORKER="+id),
			"--nats-url", p.natsURL, "--tools", cat, "--builtin-tools=none", "--id", id, "--concurrency", "32")
		w.start()
		p.workers = append(p.workers, w)
	}
	for i := range p.workers {
		p.waitAnnounced(fmt.Sprintf("w%d", i+1))
	}
	return p
}

// startNATS starts (or restarts) the nats-server and waits until JetStream
// answers.
func (p *pool) startNATS() {
	p.t.Helper()
	p.nats.start()
	p.eventually("JetStream to answer on "+p.natsAddr, func() bool {
		nc, err := nats.Connect(p.natsURL, nats.Timeout(time.Second), nats.NoReconnect())
		if err != nil {
			return false
		}
		defer nc.Close()
		j, err := js.New(nc)
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = j.AccountInfo(ctx)
		return err == nil
	})
}

// startOrchestrator starts (or restarts) the orchestrator and waits until
// it is ready.
func (p *pool) startOrchestrator() {
	p.t.Helper()
	p.orch.start()
	client := &http.Client{Timeout: 2 * time.Second}
	p.eventually("the orchestrator to be ready", func() bool {
		if done, how := p.orch.exited(); done {
			p.t.Fatalf("the orchestrator exited during its start: %s", how)
		}
		resp, err := client.Get(p.apiURL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	client.CloseIdleConnections()
}

// waitAnnounced waits until worker id has announced both tools.
func (p *pool) waitAnnounced(id string) {
	p.t.Helper()
	p.eventually("the tools announced by "+id, func() bool {
		ok := false
		p.withJS(func(ctx context.Context, j js.JetStream) {
			kv, err := j.KeyValue(ctx, discovery.BucketDefault)
			if err != nil {
				return
			}
			_, err = kv.Get(ctx, discovery.Key(tool, id))
			_, err2 := kv.Get(ctx, discovery.Key(tallyOnce, id))
			ok = err == nil && err2 == nil
		})
		return ok
	})
}

// withJS runs f on a short-lived connection of the test's own (not one of
// the pool's); it does nothing when the server cannot be reached.
func (p *pool) withJS(f func(context.Context, js.JetStream)) {
	nc, err := nats.Connect(p.natsURL, nats.Timeout(2*time.Second), nats.NoReconnect())
	if err != nil {
		return
	}
	defer nc.Close()
	j, err := js.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f(ctx, j)
}

// natsState describes the streams and the tool's consumer, for a failed
// test's log.
func (p *pool) natsState() string {
	var b strings.Builder
	b.WriteString("(server unreachable)")
	p.withJS(func(ctx context.Context, j js.JetStream) {
		b.Reset()
		for _, name := range []string{jetstream.StreamCalls, jetstream.StreamResults, "TOOL_DLQ"} {
			s, err := j.Stream(ctx, name)
			if err != nil {
				fmt.Fprintf(&b, "stream %s: %v\n", name, err)
				continue
			}
			info, err := s.Info(ctx)
			if err != nil {
				fmt.Fprintf(&b, "stream %s: %v\n", name, err)
				continue
			}
			st := info.State
			fmt.Fprintf(&b, "stream %s: %d msgs, seq %d..%d, %d deleted\n", name, st.Msgs, st.FirstSeq, st.LastSeq, st.NumDeleted)
		}
		for _, name := range []string{tool, tallyOnce} {
			c, err := j.Consumer(ctx, jetstream.StreamCalls, jetstream.ConsumerName(name))
			if err != nil {
				fmt.Fprintf(&b, "consumer %s: %v\n", jetstream.ConsumerName(name), err)
				continue
			}
			info, err := c.Info(ctx)
			if err != nil {
				fmt.Fprintf(&b, "consumer %s: %v\n", jetstream.ConsumerName(name), err)
				continue
			}
			fmt.Fprintf(&b, "consumer %s: pending %d, ack pending %d, redelivered %d, waiting pulls %d, delivered %d/%d, ack floor %d/%d, AckWait %v, MaxDeliver %d\n",
				info.Name, info.NumPending, info.NumAckPending, info.NumRedelivered, info.NumWaiting,
				info.Delivered.Consumer, info.Delivered.Stream, info.AckFloor.Consumer, info.AckFloor.Stream,
				info.Config.AckWait, info.Config.MaxDeliver)
		}
	})
	return b.String()
}

// callsQueued is how many calls TOOL_CALLS holds, or -1 when it cannot be
// read.
func (p *pool) callsQueued() int {
	n := -1
	p.withJS(func(ctx context.Context, j js.JetStream) {
		s, err := j.Stream(ctx, jetstream.StreamCalls)
		if err != nil {
			return
		}
		info, err := s.Info(ctx)
		if err != nil {
			return
		}
		n = int(info.State.Msgs)
	})
	return n
}

// eventually polls cond every 50ms until it holds or waitLong passes.
func (p *pool) eventually(what string, cond func() bool) {
	p.t.Helper()
	deadline := time.Now().Add(waitLong)
	for !cond() {
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out after %v waiting for %s", waitLong, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// executions reads the tool's log: per marker, the workers that ran it,
// in the order they started; and executions per worker.
func (p *pool) executions() (perMarker map[string][]string, perWorker map[string]int) {
	p.t.Helper()
	perMarker, perWorker = map[string][]string{}, map[string]int{}
	data, err := os.ReadFile(p.execLog)
	if errors.Is(err, os.ErrNotExist) {
		return perMarker, perWorker
	}
	if err != nil {
		p.t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		marker, worker, ok := strings.Cut(line, " ")
		if !ok {
			p.t.Errorf("execution log line %q is not \"<marker> <worker>\"", line)
			continue
		}
		perMarker[marker] = append(perMarker[marker], worker)
		perWorker[worker]++
	}
	return perMarker, perWorker
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// lockedBuffer is a bytes.Buffer safe for a process's output and the test.
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
