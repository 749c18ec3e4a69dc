package dispatch

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Two orchestrator replicas on one JetStream: an agent whose replica died
// (its connection to the agent dies with it) posts the same calls to
// another one. Each call runs at most once whether the first replica held
// it, had it running on a worker or had its result.

// startReplica starts a dispatcher of its own on b's server, on a
// connection of its own (the test may close it hard, as a kill -9 would).
func startReplica(t *testing.T, b *testBundle, mod ...func(*Config)) (*Dispatcher, *nats.Conn) {
	t.Helper()
	nc := natstest.Connect(t, b.srv.ClientURL())
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		JS: j, Catalog: discovery.StaticCatalog("echo", "slow"), NoFairness: true,
		Logger: natstest.Logger(t), Metrics: newTestMetrics(),
	}
	for _, m := range mod {
		m(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopNow(d) })
	return d, nc
}

// blockingWorker serves tool: the call with id block waits until release
// is closed, every other call is answered at once with "done <id>". runs
// counts the executions per call id. With inline, the blocked call holds
// the worker and is acked after its result, as pkg/worker does; without,
// it is acked at once, so other calls run meanwhile.
type blockingWorker struct {
	*fakeWorker
	release chan struct{}
	mu      sync.Mutex
	runs    map[string]int
}

func startBlockingWorker(t *testing.T, b *testBundle, tool, block string, inline bool) *blockingWorker {
	bw := &blockingWorker{release: make(chan struct{}), runs: map[string]int{}}
	bw.fakeWorker = startWorker(t, b, tool, func(w *fakeWorker, c *envelope.Call, _ nats.Header, reply reply) {
		bw.mu.Lock()
		bw.runs[c.ID]++
		bw.mu.Unlock()
		if c.ID != block {
			reply(&envelope.Result{Content: envelope.Text("done " + c.ID)}, msgID(c))
			return
		}
		if inline {
			select {
			case <-bw.release:
				reply(&envelope.Result{Content: envelope.Text("done " + c.ID)}, msgID(c))
			case <-w.done:
			}
			return
		}
		w.Go(func(done <-chan struct{}) {
			select {
			case <-bw.release:
			case <-done:
				return
			}
			reply(&envelope.Result{Content: envelope.Text("done " + c.ID)}, msgID(c))
		})
	})
	return bw
}

func (bw *blockingWorker) ran(id string) int {
	bw.mu.Lock()
	defer bw.mu.Unlock()
	return bw.runs[id]
}

// dispatchOne runs a turn of one call on d in the background.
func dispatchOne(t *testing.T, d *Dispatcher, ctx context.Context, id, tool string) <-chan envelope.Result {
	ch := make(chan envelope.Result, 1)
	go func() {
		res, err := d.Dispatch(ctx, "s", []envelope.ToolUseBlock{use(id, tool, `{"text":"x"}`)})
		if err != nil {
			ch <- envelope.Result{IsError: true, Content: envelope.Text(err.Error())}
			return
		}
		ch <- res[0]
	}()
	return ch
}

// wantDone waits for a result on ch and checks it is the tool's for id.
func wantDone(t *testing.T, what string, ch <-chan envelope.Result, id string) {
	t.Helper()
	select {
	case r := <-ch:
		if r.IsError || r.Content.Text() != "done "+id {
			t.Errorf("%s: %+v; want the tool's result", what, r)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no result", what)
	}
}

// A call held by replica A (its tool's window is full) was never
// published: A's connection closed hard, the agent posts it to B, and it
// runs there, once.
func TestReplicaRunsCallHeldByDeadReplica(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := startBlockingWorker(t, b, "slow", "blocker", false)
	a, ncA := startReplica(t, b, noMargin, func(c *Config) {
		c.NoFairness = false
		c.Catalog = fairCatalog{"slow": {Slots: 1}}
	})
	rb, _ := startReplica(t, b)
	ctx := timeout(t, 30*time.Second)
	dispatchOne(t, a, ctx, "blocker", "slow")
	eventually(t, "the blocker at the worker", func() bool { return w.ran("blocker") == 1 })
	dispatchOne(t, a, ctx, "held", "slow")
	eventually(t, "the call held by A", func() bool { return toolStats(a, "slow").Waiting == 1 })

	ncA.Close() // A is gone
	wantDone(t, "the held call posted to B", dispatchOne(t, rb, ctx, "held", "slow"), "held")
	close(w.release) // A's slot frees up, but A has no connection: it publishes nothing
	stopNow(a)
	if n := w.ran("held"); n != 1 {
		t.Errorf("the held call ran %d times; want 1", n)
	}
	if n := w.ran("blocker"); n != 1 {
		t.Errorf("the blocker ran %d times; want 1", n)
	}
}

// A call running on a worker for replica A, posted again to B after A's
// connection closed hard: B does not run it again, it waits for the
// running call's result (a duplicate watch) and answers with it.
func TestReplicaAnswersCallRunningForDeadReplica(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := startBlockingWorker(t, b, "slow", "running", true)
	a, ncA := startReplica(t, b)
	rb, _ := startReplica(t, b)
	ctx := timeout(t, 30*time.Second)
	dispatchOne(t, a, ctx, "running", "slow")
	eventually(t, "the call at the worker", func() bool { return w.ran("running") == 1 })

	ncA.Close()
	got := dispatchOne(t, rb, ctx, "running", "slow")
	key := envelope.CallKey("", "s", "running", "slow", []byte(`{"text":"x"}`))
	eventually(t, "B watching for the running call's result", func() bool {
		_, watching := rb.watching.Load(key)
		return watching
	})
	close(w.release)
	wantDone(t, "the running call posted to B", got, "running")
	stopNow(a)
	if n := w.ran("running"); n != 1 {
		t.Errorf("the call ran %d times; want 1", n)
	}
}

// A call that finished for replica A, posted again to B after A's
// connection closed hard: B answers with the stored result.
func TestReplicaAnswersCallFinishedForDeadReplica(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := startBlockingWorker(t, b, "echo", "", false)
	a, ncA := startReplica(t, b)
	rb, _ := startReplica(t, b)
	ctx := timeout(t, 30*time.Second)
	wantDone(t, "the call on A", dispatchOne(t, a, ctx, "finished", "echo"), "finished")
	ncA.Close()
	wantDone(t, "the finished call posted to B", dispatchOne(t, rb, ctx, "finished", "echo"), "finished")
	if n := w.ran("finished"); n != 1 {
		t.Errorf("the call ran %d times; want 1", n)
	}
}

// restartServer shuts b's server down and starts it again on the same
// address and store, as a restart of the NATS server (or of serve with its
// embedded server) does. It sets b.srv to the new server (setup shuts it
// down when the test ends).
func restartServer(t *testing.T, b *testBundle) *embedded.Server {
	t.Helper()
	u, err := url.Parse(b.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	b.srv.Shutdown()
	srv, err := embedded.Start(embedded.Options{Listen: u.Host, DataDir: filepath.Dir(b.srv.StoreDir()), Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	b.srv = srv
	return srv
}

// A restarted server rebuilds its duplicate window only from the messages
// still stored; a finished call has left TOOL_CALLS. The same call posted
// after the restart, to a dispatcher started after it (serve restarted with
// its embedded server) or to one whose connection came back (a NATS server
// restarted under it), is answered from its stored result instead of
// running again (issue 23).
func TestStoredResultAnswersRepostAfterServerRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := startBlockingWorker(t, b, "echo", "", false)
	stays, ncStays := startReplica(t, b)
	ctx := timeout(t, 60*time.Second)
	wantDone(t, "the call before the restart", dispatchOne(t, b.d, ctx, "before", "echo"), "before")
	turn := []envelope.ToolUseBlock{use("m1", "echo", `{}`), use("m2", "echo", `{}`), use("m3", "echo", `{}`)}
	if _, err := b.d.Dispatch(ctx, "s", turn); err != nil {
		t.Fatal(err)
	}
	stopNow(b.d)

	restarted := make(chan struct{})
	ncStays.SetReconnectHandler(func(*nats.Conn) { close(restarted) })
	restartServer(t, b)
	select {
	case <-restarted:
	case <-time.After(30 * time.Second):
		t.Fatal("the dispatcher's connection did not come back")
	}
	eventually(t, "the look-up window opened at the reconnection", func() bool { return !stays.recovery.closed() })
	fresh, _ := startReplica(t, b)
	if fresh.recovery.closed() {
		t.Error("a dispatcher started after the restart opened no look-up window")
	}
	// A short deadline: a call published again would wait for a worker
	// (the fake one does not come back) and expire.
	short := timeout(t, 5*time.Second)
	wantDone(t, "the call posted again to a new dispatcher", dispatchOne(t, fresh, short, "before", "echo"), "before")
	wantDone(t, "the call posted again to a reconnected dispatcher", dispatchOne(t, stays, short, "before", "echo"), "before")
	res, err := fresh.Dispatch(short, "s", turn)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.IsError || r.Content.Text() != "done "+turn[i].ID {
			t.Errorf("call %s of the turn posted again: %+v", turn[i].ID, r)
		}
	}
	for _, id := range []string{"before", "m1", "m2", "m3"} {
		if n := w.ran(id); n != 1 {
			t.Errorf("call %s ran %d times; want 1", id, n)
		}
	}
}

// shortDuplicateWindow sets the duplicate window of TOOL_CALLS and
// TOOL_RESULTS to window (below what Provision allows), so that a test can
// outlast it.
func shortDuplicateWindow(t *testing.T, j js.JetStream, window time.Duration) {
	t.Helper()
	ctx := timeout(t, 10*time.Second)
	for _, name := range []string{jetstream.StreamCalls, jetstream.StreamResults} {
		s, err := j.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		cfg.Duplicates = window
		if _, err := j.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
}

// A call held by replica A for longer than the duplicate window, while the
// agent posted it to B where it ran: when A's grant comes, JetStream has
// forgotten B's message, so A looks the stored result up before
// publishing and answers with it; the call ran once.
func TestHeldPastDuplicateWindowAnswersFromStoredResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const window = time.Second
	shortDuplicateWindow(t, b.js, window)
	w := startBlockingWorker(t, b, "slow", "blocker", false)
	a, _ := startReplica(t, b, noMargin, func(c *Config) {
		c.NoFairness = false
		c.Catalog = fairCatalog{"slow": {Slots: 1}}
	})
	rb, _ := startReplica(t, b)
	ctx := timeout(t, 60*time.Second)
	blocker := dispatchOne(t, a, ctx, "blocker", "slow")
	eventually(t, "the blocker at the worker", func() bool { return w.ran("blocker") == 1 })
	held := dispatchOne(t, a, ctx, "held", "slow")
	eventually(t, "the call held by A", func() bool { return toolStats(a, "slow").Waiting == 1 })
	wantDone(t, "the held call posted to B", dispatchOne(t, rb, ctx, "held", "slow"), "held")
	// B published the call before its result came: the window counts
	// from no later than now.
	stored := time.Now()
	natstest.Eventually(t, time.Minute, "the duplicate window to pass", func() bool { return time.Since(stored) > window+window/2 })

	close(w.release)
	wantDone(t, "the blocker", blocker, "blocker")
	wantDone(t, "the call held by A past the duplicate window", held, "held")
	if n := w.ran("held"); n != 1 {
		t.Errorf("the held call ran %d times; want 1", n)
	}
}

// A turn whose ctx is cancelled with ErrDetached (its front door stopped)
// leaves its calls in the pool: the running call is not cancelled, and
// the same call dispatched again gets its result without running again.
// A caller's own cancellation would have cancelled it, and the call would
// then run again.
func TestDetachedTurnLeavesCallsRunning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := startBlockingWorker(t, b, "slow", "det", true)
	ctx, cancel := context.WithCancelCause(timeout(t, 30*time.Second))
	first := dispatchOne(t, b.d, ctx, "det", "slow")
	eventually(t, "the call at the worker", func() bool { return w.ran("det") == 1 })
	cancel(ErrDetached)
	if r := <-first; !r.IsError || !strings.Contains(r.Content.Text(), ErrDetached.Error()) {
		t.Errorf("the detached turn: %+v; want its error", r)
	}
	again := dispatchOne(t, b.d, timeout(t, 30*time.Second), "det", "slow")
	close(w.release)
	wantDone(t, "the call dispatched again", again, "det")
	if n := w.ran("det"); n != 1 {
		t.Errorf("the call ran %d times; want 1", n)
	}
}

// A call held by replica A that stays alive, while the same call is
// dispatched on B and runs there (an adopting replica, or a re-post):
// A's grant publishes a duplicate, and A answers with B's run's result.
func TestHeldOnLiveReplicaGetsOtherReplicasResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := startBlockingWorker(t, b, "slow", "blocker", false)
	a, _ := startReplica(t, b, noMargin, func(c *Config) {
		c.NoFairness = false
		c.Catalog = fairCatalog{"slow": {Slots: 1}}
	})
	rb, _ := startReplica(t, b)
	ctx := timeout(t, 30*time.Second)
	blocker := dispatchOne(t, a, ctx, "blocker", "slow")
	eventually(t, "the blocker at the worker", func() bool { return w.ran("blocker") == 1 })
	held := dispatchOne(t, a, ctx, "held", "slow")
	eventually(t, "the call held by A", func() bool { return toolStats(a, "slow").Waiting == 1 })
	wantDone(t, "the held call dispatched on B", dispatchOne(t, rb, ctx, "held", "slow"), "held")
	close(w.release)
	wantDone(t, "the blocker", blocker, "blocker")
	wantDone(t, "the call held by A", held, "held")
	if n := w.ran("held"); n != 1 {
		t.Errorf("the held call ran %d times; want 1", n)
	}
}
