package faults_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/proctest"
	"github.com/toolpool/toolpool/jetstream"
)

// waitLong bounds every wait for something that should happen: generous,
// because the machine is shared.
const waitLong = 60 * time.Second

// program is one program of the pool, run possibly several times: a
// restart runs the same command again (arguments, environment and working
// directory). Each run is a proctest.Proc named with its number, killed
// when the test ends and its output's tail logged when the test failed.
// Its methods are called from the test's goroutine.
type program struct {
	t    *testing.T
	cmd  proctest.Command
	runs int
	proc *proctest.Proc // the current run; nil once stopped by signal
}

// newProgram prepares a program; start runs it.
func newProgram(t *testing.T, name, bin string, env []string, args ...string) *program {
	return &program{t: t, cmd: proctest.Command{Name: name, Path: bin, Args: args, Env: env, Dir: t.TempDir(), LogTail: 6000}}
}

// start runs the program again; the previous run must have been stopped.
func (p *program) start() {
	p.t.Helper()
	if p.proc != nil {
		p.t.Fatalf("%s started while running", p.cmd.Name)
	}
	p.runs++
	run := p.cmd
	run.Name = fmt.Sprintf("%s, run %d", p.cmd.Name, p.runs)
	p.proc = run.Start(p.t)
}

// signal sends sig to the current run and waits up to d for it to end;
// it fails the test if it does not.
func (p *program) signal(sig syscall.Signal, d time.Duration) {
	p.t.Helper()
	if p.proc == nil {
		p.t.Fatalf("%s: not running", p.cmd.Name)
	}
	_ = p.proc.Signal(sig)
	p.proc.Wait(d)
	p.proc = nil
}

// pool is the whole system as processes: one nats-server, one
// orchestrator, the workers.
type pool struct {
	t        *testing.T
	natsAddr string // host:port of the nats-server, the same across restarts
	natsURL  string
	apiURL   string // the orchestrator's HTTP API, the same across restarts
	execLog  string // the tool's one line per execution
	nats     *program
	orch     *program
	workers  []*program
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
// processes, each run with workerArgs besides its own, and waits until
// every worker has announced the tool.
func startPool(t *testing.T, workers int, workerArgs ...string) *pool {
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
	p.nats = newProgram(t, "nats-server", natsServerBin, base,
		"--jetstream", "--store_dir", filepath.Join(dir, "jetstream"), "--addr", "127.0.0.1",
		"--port", fmt.Sprint(ports[0]), "--server_name", "faults")
	p.startNATS()

	p.orch = newProgram(t, "orchestrator", orchestratorBin, base,
		"serve", "--nats-url", p.natsURL, "--workers", "0", "--http", strings.TrimPrefix(p.apiURL, "http://"))
	p.startOrchestrator()

	cat := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(cat, []byte(catalog()), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range workers {
		id := fmt.Sprintf("w%d", i+1)
		w := newProgram(t, "worker "+id, workerBin,
			append(base, "TALLY_LOG="+p.execLog, "TALLY_WORKER="+id),
			append([]string{"--nats-url", p.natsURL, "--tools", cat, "--builtin-tools=none", "--id", id, "--concurrency", "32"},
				workerArgs...)...)
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
	p.nats.proc.Eventually(waitLong, "JetStream to answer on "+p.natsAddr, func() bool {
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
	p.orch.proc.WaitHTTP(p.apiURL+"/readyz", waitLong)
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
func (p *pool) withJS(f func(context.Context, js.JetStream)) { natstest.WithJS(p.natsURL, f) }

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

// consumerAckWait is the AckWait of the consumer of tool name, or 0 when
// it cannot be read.
func (p *pool) consumerAckWait(name string) time.Duration {
	var d time.Duration
	p.withJS(func(ctx context.Context, j js.JetStream) {
		c, err := j.Consumer(ctx, jetstream.StreamCalls, jetstream.ConsumerName(name))
		if err != nil {
			return
		}
		if info, err := c.Info(ctx); err == nil {
			d = info.Config.AckWait
		}
	})
	return d
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

// eventually polls cond until it holds, failing the test after waitLong.
func (p *pool) eventually(what string, cond func() bool) {
	p.t.Helper()
	natstest.Eventually(p.t, waitLong, what, cond)
}

// startedOn lists the markers of the executions that have started on
// worker id so far, by the tool's log. Unlike executions, it may be called
// while the tool runs: it ignores a line still being written.
func (p *pool) startedOn(id string) []string {
	data, err := os.ReadFile(p.execLog)
	if err != nil {
		return nil
	}
	lines := strings.Split(string(data), "\n")
	lines = lines[:len(lines)-1] // what follows the last newline: nothing, or a line being written
	var markers []string
	for _, line := range lines {
		if marker, worker, ok := strings.Cut(line, " "); ok && worker == id {
			markers = append(markers, marker)
		}
	}
	return markers
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
	// Read while the tools run too: the shell creates the file before its
	// line is written, and a line may be half written. Only whole lines
	// count; the last one, without its newline yet, is read next time.
	for line := range strings.Lines(string(data)) {
		line, whole := strings.CutSuffix(line, "\n")
		if !whole {
			break
		}
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
