package opscmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/internal/testbin"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// dlPool is a server, workers with an attempt history serving one
// downstream tool that is down until up() is called, and a dispatcher.
type dlPool struct {
	url  string
	nc   *nats.Conn
	js   js.JetStream
	d    *dispatch.Dispatcher
	down atomic.Bool

	mu    sync.Mutex
	execs map[string]int // successful executions per original call id
}

func newDLPool(t *testing.T, workers int) *dlPool {
	t.Helper()
	srv, nc, j := natstest.StartProvisioned(t)
	p := &dlPool{url: srv.ClientURL(), nc: nc, js: j, execs: map[string]int{}}
	p.down.Store(true)
	reg := tools.NewRegistry()
	err := reg.Register(tools.Tool{
		Name: "downstream", Description: "calls a service that is down for a while",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`),
		Timeout:     2 * time.Second,
		Retry:       classify.Policy{MaxAttempts: 3, BaseDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond},
		Handler: func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
			if p.down.Load() {
				return tools.Output{}, &classify.HTTPError{StatusCode: 503}
			}
			ci, _ := tools.CallInfoFrom(ctx)
			orig := ci.ID
			if i := strings.LastIndex(orig, "-r"); i > 0 {
				orig = orig[:i]
			}
			p.mu.Lock()
			p.execs[orig]++
			p.mu.Unlock()
			return tools.Text("served " + orig), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	history, err := settle.OpenHistory(t.Context(), j, settle.HistoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for range workers {
		pooltest.StartServer(t, p.url, reg, func(c *pooltest.ServerConfig) { c.Worker.History = history })
	}
	p.d = pooltest.StartOrchestrator(t, j.Conn(), discovery.RegistryCatalog(reg)).Dispatcher()
	return p
}

// fail dispatches n calls while the downstream is down: each is
// dead-lettered. It returns their ids.
func (p *dlPool) fail(t *testing.T, n int) []string {
	t.Helper()
	var blocks []envelope.ToolUseBlock
	for i := range n {
		blocks = append(blocks, envelope.ToolUseBlock{Type: "tool_use", ID: fmt.Sprintf("toolu_%s_%02d", strings.ReplaceAll(t.Name(), "/", "_"), i),
			Name: "downstream", Input: json.RawMessage(fmt.Sprintf(`{"q":"query %d"}`, i))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := p.d.Dispatch(ctx, "", blocks)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i, r := range res {
		if !r.IsError || r.Attempts != 3 {
			t.Fatalf("call %d = %+v, want is_error after 3 attempts", i, r)
		}
		ids[i] = blocks[i].ID
	}
	return ids
}

func (p *dlPool) executions() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.execs))
	for k, v := range p.execs {
		out[k] = v
	}
	return out
}

// orch runs the orchestrator command in-process.
func orch(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func dlqCount(t *testing.T, j js.JetStream) uint64 {
	t.Helper()
	s, err := j.Stream(t.Context(), jetstream.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestDLQLsAndShow(t *testing.T) {
	t.Parallel()
	p := newDLPool(t, 2)
	ids := p.fail(t, 1)

	code, out, errOut := orch(t, "dlq", "ls", "--nats-url", p.url)
	if code != 0 {
		t.Fatalf("dlq ls: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "SEQ") {
		t.Fatalf("dlq ls printed:\n%s", out)
	}
	fields := strings.Fields(lines[1])
	if len(fields) < 5 || fields[1] != "downstream" || fields[2] != "exhausted" || fields[3] != "3" || !strings.Contains(lines[1], "http_503") {
		t.Errorf("dlq ls row = %q", lines[1])
	}
	seq := fields[0]

	code, out, errOut = orch(t, "dlq", "show", "--nats-url", p.url, seq)
	if code != 0 {
		t.Fatalf("dlq show: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"reason:", "exhausted", ids[0], `"q": "query 0"`, "attempt history:", "first failure:", "last failure:"} {
		if !strings.Contains(out, want) {
			t.Errorf("dlq show does not print %q:\n%s", want, out)
		}
	}
	// One row per attempt: "  N  date time  duration  worker  transient  http_503  message".
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 6 && f[0] == strconv.Itoa(rows+1) && strings.Contains(line, "transient") && strings.Contains(line, "http_503") {
			rows++
		}
	}
	if rows != 3 {
		t.Errorf("dlq show prints %d attempt rows, want 3:\n%s", rows, out)
	}

	code, out, _ = orch(t, "dlq", "show", "--nats-url", p.url, "--json", seq)
	var shown struct {
		Seq   uint64
		Entry settle.Entry
	}
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || len(shown.Entry.Attempts) != 3 || shown.Entry.CallID != ids[0] {
		t.Errorf("dlq show --json: exit %d:\n%s", code, out)
	}
	code, out, _ = orch(t, "dlq", "ls", "--nats-url", p.url, "--json", "--reason", "poison")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("dlq ls --reason poison: exit %d: %s", code, out)
	}
	if code, _, _ := orch(t, "dlq", "show", "--nats-url", p.url, "99999"); code != 1 {
		t.Errorf("dlq show of a missing letter: exit %d, want 1", code)
	}
	for _, args := range [][]string{{"dlq"}, {"dlq", "frob"}, {"dlq", "show"}, {"dlq", "show", "x"}, {"dlq", "ls", "--reason", "bored"},
		{"dlq", "replay"}, {"dlq", "replay", "1", "--all"}, {"dlq", "replay", "--all", "--rate", "fast"}, {"dlq", "purge", "1", "--tool", "x"},
		// A tool that is not one subject token would select every
		// tool's dead letters (and purge them all).
		{"dlq", "ls", "--nats-url", p.url, "--tool", "*"}, {"dlq", "purge", "--nats-url", p.url, "--all", "--tool", ">", "--yes"},
		{"dlq", "replay", "--nats-url", p.url, "--all", "--tool", "a b"}} {
		if code, _, _ := orch(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestDLQPurgeNeedsYes(t *testing.T) {
	t.Parallel()
	p := newDLPool(t, 1)
	p.fail(t, 2)
	code, out, errOut := orch(t, "dlq", "purge", "--nats-url", p.url, "--all")
	if code != 2 || !strings.Contains(errOut, "would delete 2 dead letters") || !strings.Contains(errOut, "--yes") || out != "" {
		t.Errorf("purge --all without --yes: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	code, _, errOut = orch(t, "dlq", "purge", "--nats-url", p.url, "1")
	if code != 2 || !strings.Contains(errOut, "would delete 1 dead letters") {
		t.Errorf("purge 1 without --yes: exit %d:\n%s", code, errOut)
	}
	if n := dlqCount(t, p.js); n != 2 {
		t.Fatalf("TOOL_DLQ holds %d after purges without --yes, want 2", n)
	}
	code, out, errOut = orch(t, "dlq", "purge", "--nats-url", p.url, "--all", "--tool", "downstream", "--yes")
	if code != 0 || !strings.Contains(out, "deleted 2 dead letters") {
		t.Errorf("purge --yes: exit %d: %s %s", code, out, errOut)
	}
	if n := dlqCount(t, p.js); n != 0 {
		t.Errorf("TOOL_DLQ holds %d after purge --yes, want 0", n)
	}
}

// After the downstream recovers, replay --all --wait runs every call once
// more, successfully, and empties TOOL_DLQ.
func TestDLQReplayAllAfterRecovery(t *testing.T) {
	t.Parallel()
	p := newDLPool(t, 2)
	ids := p.fail(t, 4)
	p.down.Store(false)

	code, out, errOut := orch(t, "dlq", "replay", "--nats-url", p.url, "--all", "--dry-run")
	if code != 0 || strings.Count(out, "would replay") != 4 || dlqCount(t, p.js) != 4 {
		t.Fatalf("replay --dry-run: exit %d:\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = orch(t, "dlq", "replay", "--nats-url", p.url, "--all", "--rate", "0", "--wait", "--timeout", "1m")
	if code != 0 {
		t.Fatalf("replay --all --wait: exit %d:\n%s\n%s", code, out, errOut)
	}
	if n := strings.Count(out, "replayed  "); n != 4 {
		t.Errorf("%d replayed lines, want 4:\n%s", n, out)
	}
	for _, id := range ids {
		if !strings.Contains(out, "ok: served "+id) {
			t.Errorf("no successful result for %s:\n%s", id, out)
		}
	}
	if n := dlqCount(t, p.js); n != 0 {
		t.Errorf("TOOL_DLQ holds %d after the replay, want 0", n)
	}
	for _, id := range ids {
		if n := p.executions()[id]; n != 1 {
			t.Errorf("%s executed %d times after recovery, want 1", id, n)
		}
	}
}

// A replay killed (SIGKILL) halfway, then run again: no dead letter is
// lost and none is replayed twice. It runs the orchestrator binary, to
// kill it.
func TestDLQReplayKilledHalfway(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := testbin.Build(dir, "./cmd/orchestrator"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "orchestrator")
	const n = 8
	p := newDLPool(t, 2)
	ids := p.fail(t, n)
	p.down.Store(false)

	cmd := exec.Command(bin, "dlq", "replay", "--nats-url", p.url, "--all", "--rate", "4/s")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	replayed := 0
	for replayed < 3 && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "replayed") {
			replayed++
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if replayed < 3 {
		t.Fatalf("the first replay printed %d replays before it ended:\n%s", replayed, stderr.String())
	}
	left := dlqCount(t, p.js)
	if left == 0 || left >= n {
		t.Fatalf("after the kill TOOL_DLQ holds %d of %d: the kill did not land halfway", left, n)
	}

	again := exec.Command(bin, "dlq", "replay", "--nats-url", p.url, "--all", "--rate", "0")
	out, err := again.CombinedOutput()
	if err != nil {
		t.Fatalf("second replay: %v\n%s", err, out)
	}
	if got := strings.Count(string(out), "replayed  "); uint64(got) != left {
		t.Errorf("the second replay replayed %d, want the %d left:\n%s", got, left, out)
	}

	// Every original ran exactly once: wait for all, then check nothing is
	// left that could run again.
	deadline := time.Now().Add(time.Minute)
	for {
		total := 0
		for _, c := range p.executions() {
			total += c
		}
		if total >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("executions after recovery: %v, want each of %d once", p.executions(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cons, err := p.js.Consumer(t.Context(), jetstream.StreamCalls, jetstream.ConsumerName("downstream"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := cons.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls still queued: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	execs := p.executions()
	for _, id := range ids {
		if execs[id] != 1 {
			t.Errorf("%s executed %d times after recovery, want 1", id, execs[id])
		}
	}
	if len(execs) != n {
		t.Errorf("executions = %v, want the %d originals", execs, n)
	}
	if m := dlqCount(t, p.js); m != 0 {
		t.Errorf("TOOL_DLQ holds %d, want 0", m)
	}
}

func TestStatusCommand(t *testing.T) {
	t.Parallel()
	p := newDLPool(t, 1)
	p.fail(t, 2)
	code, out, errOut := orch(t, "status", "--nats-url", p.url, "--json")
	if code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, errOut)
	}
	var st []struct {
		Tool        string   `json:"tool"`
		Consumer    bool     `json:"consumer"`
		Pending     uint64   `json:"pending"`
		DeadLetters uint64   `json:"dead_letters"`
		Workers     []string `json:"workers"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if len(st) != 1 || st[0].Tool != "downstream" || !st[0].Consumer || st[0].DeadLetters != 2 || st[0].Pending != 0 {
		t.Errorf("status = %+v", st)
	}
	code, out, _ = orch(t, "status", "--nats-url", p.url)
	if code != 0 || !strings.Contains(out, "DEAD-LETTERED") || !strings.Contains(out, "downstream") {
		t.Errorf("status: exit %d:\n%s", code, out)
	}
}
