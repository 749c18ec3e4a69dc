package backlog_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/fleet/backlog"
	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
)

const waitLong = 20 * time.Second

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitLong)
	t.Cleanup(cancel)
	return ctx
}

// workers is a live catalog: the tools it lists have one worker each.
type workers struct {
	mu    sync.Mutex
	tools map[string]bool
}

func liveFor(tools ...string) *workers {
	w := &workers{tools: map[string]bool{}}
	for _, t := range tools {
		w.tools[t] = true
	}
	return w
}

func (w *workers) Names(context.Context) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for t := range w.tools {
		out = append(out, t)
	}
	return out
}

func (w *workers) Workers(_ context.Context, tool string) []discovery.Announcement {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.tools[tool] {
		return nil
	}
	return []discovery.Announcement{{WorkerID: "w-" + tool}}
}

// setup starts a provisioned server, makes tool's consumer and queues n
// calls of it.
func setup(t *testing.T, tool string, n int) js.JetStream {
	t.Helper()
	_, _, j := natstest.StartProvisioned(t)
	if _, err := jetstream.EnsureConsumer(ctxFor(t), j, jetstream.ConsumerSpec{Tool: tool}); err != nil {
		t.Fatal(err)
	}
	queue(t, j, tool, n)
	// The server counts a consumer's pending messages on a goroutine of
	// its own: a read right after the publishes may see fewer.
	natstest.Eventually(t, waitLong, "the consumer to count the queued calls", func() bool {
		return natstest.CallConsumerInfo(t, j, tool).NumPending == uint64(n)
	})
	return j
}

func queue(t *testing.T, j js.JetStream, tool string, n int) {
	t.Helper()
	for range n {
		if _, err := j.Publish(ctxFor(t), jetstream.CallSubject(tool), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
}

func start(t *testing.T, cfg backlog.Config) *backlog.Monitor {
	t.Helper()
	cfg.Logger = natstest.Logger(t)
	m, err := backlog.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	return m
}

func find(t *testing.T, m *backlog.Monitor, tool string) backlog.ToolBacklog {
	t.Helper()
	tools, err := m.Backlog(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range tools {
		if b.Tool == tool {
			return b
		}
	}
	t.Fatalf("no %s in the backlog %+v", tool, tools)
	return backlog.ToolBacklog{}
}

// Queued calls nobody takes: the oldest one's age grows, the tool is
// backing up once it passes the threshold, and ok again once a worker
// took them all.
func TestBacklogAgeGrowsThenDrains(t *testing.T) {
	t.Parallel()
	j := setup(t, "slow", 3)
	m := start(t, backlog.Config{JetStream: j, Live: liveFor("slow"), BacklogAge: 2 * time.Second,
		StallAfter: time.Hour, NoHistory: true})

	first := find(t, m, "slow")
	if first.Queued != 3 || first.Running != 0 || first.Workers != 1 || first.OldestAge <= 0 {
		t.Fatalf("backlog %+v, want 3 queued with an age, 1 worker", first)
	}
	if (first.State == backlog.StateBackingUp) != (first.OldestAge > 2*time.Second) {
		t.Errorf("state %s with the oldest %v old (threshold 2s)", first.State, first.OldestAge)
	}
	var b backlog.ToolBacklog
	natstest.Eventually(t, waitLong, "the oldest call past the threshold", func() bool {
		b = find(t, m, "slow")
		return b.OldestAge > 2*time.Second
	})
	if b.OldestAge <= first.OldestAge || b.State != backlog.StateBackingUp ||
		!strings.Contains(b.Reason, "the oldest queued call waited") {
		t.Errorf("backlog %+v after %+v, want an older call and backing_up", b, first)
	}

	// A worker takes the calls and answers them.
	cons, err := j.Consumer(ctxFor(t), jetstream.StreamCalls, jetstream.ConsumerName("slow"))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(3, js.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for msg := range batch.Messages() {
		if err := msg.DoubleAck(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
	}
	natstest.Eventually(t, waitLong, "the backlog drained", func() bool {
		b = find(t, m, "slow")
		return b.Queued == 0 && b.Running == 0
	})
	if b.State != backlog.StateOK || b.Reason != "" || b.OldestAge != 0 || !b.Draining || b.Drain != 0 {
		t.Errorf("drained backlog %+v, want ok", b)
	}
}

// Calls queued for a tool no live worker serves: stalled, at once.
func TestStalledWithoutWorker(t *testing.T) {
	t.Parallel()
	j := setup(t, "orphan", 1)
	m := start(t, backlog.Config{JetStream: j, Live: liveFor("other"), NoHistory: true})
	b := find(t, m, "orphan")
	if b.State != backlog.StateStalled || b.Workers != 0 || !strings.Contains(b.Reason, "no live worker serves orphan") {
		t.Errorf("backlog %+v, want stalled: no worker", b)
	}
	if o := find(t, m, "other"); o.State != backlog.StateOK || o.Workers != 1 || o.Queued != 0 {
		t.Errorf("the other tool %+v, want ok with its worker", o)
	}
}

// A paused tool with calls queued is stalled, until it is resumed.
func TestStalledWhilePaused(t *testing.T) {
	t.Parallel()
	j := setup(t, "paused", 1)
	if _, err := ops.PauseTool(ctxFor(t), j, "paused", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	m := start(t, backlog.Config{JetStream: j, Live: liveFor("paused"), NoHistory: true})
	b := find(t, m, "paused")
	if b.State != backlog.StateStalled || b.PausedUntil == nil || !strings.Contains(b.Reason, "is paused until") {
		t.Errorf("backlog %+v, want stalled: paused", b)
	}
}

// Calls queued, a worker announced, and nothing delivered for StallAfter:
// stalled (a worker that announces itself and never pulls).
func TestStalledWhenNothingMoves(t *testing.T) {
	t.Parallel()
	j := setup(t, "stuck", 2)
	m := start(t, backlog.Config{JetStream: j, Live: liveFor("stuck"), StallAfter: 2 * time.Second,
		BacklogAge: time.Hour, NoHistory: true})
	if b := find(t, m, "stuck"); b.State == backlog.StateStalled {
		t.Fatalf("stalled at the first reading: %+v", b)
	}
	var b backlog.ToolBacklog
	natstest.Eventually(t, waitLong, "stalled", func() bool {
		b = find(t, m, "stuck")
		return b.State == backlog.StateStalled
	})
	if !strings.Contains(b.Reason, "nothing delivered or answered for") {
		t.Errorf("reason %q", b.Reason)
	}
}

// Two replicas sample the same fleet, each its own results: Range sums
// them per slot, each result once.
func TestTwoReplicasAddUp(t *testing.T) {
	t.Parallel()
	j := setup(t, "echo", 0)
	cfg := backlog.Config{JetStream: j, Live: liveFor("echo"), SampleEvery: time.Second}
	cfg.Instance = "orch-a"
	a := start(t, cfg)
	cfg.Instance = "orch-b"
	b := start(t, cfg)

	const n = 30
	for i := range n {
		m, class := a, ""
		if i%2 == 1 {
			m = b
		}
		if i%3 == 0 {
			class = "transient"
		}
		m.ObserveResult("echo", class, time.Duration(i+1)*time.Millisecond)
		if i%10 == 9 {
			time.Sleep(400 * time.Millisecond) // spread them over slots
		}
	}
	var samples []backlog.Sample
	natstest.Eventually(t, waitLong, "every result sampled", func() bool {
		var err error
		samples, err = a.Range(ctxFor(t), time.Now().Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		calls := 0.0
		for _, s := range samples {
			calls += s.Pool.CallsPerSec
		}
		return calls >= n
	})
	calls, errs, both := 0.0, 0.0, false
	for i, s := range samples {
		if i > 0 && !s.At.After(samples[i-1].At) {
			t.Fatalf("samples not one per slot, oldest first: %v then %v", samples[i-1].At, s.At)
		}
		if s.At.Truncate(time.Second) != s.At || len(s.Instances) == 0 {
			t.Errorf("sample %+v", s)
		}
		both = both || len(s.Instances) == 2
		calls += s.Pool.CallsPerSec
		errs += s.Pool.ErrorsPerSec["transient"]
		if len(s.Tools) != 1 || s.Tools[0].Tool != "echo" || s.Tools[0].CallsPerSec != s.Pool.CallsPerSec {
			t.Errorf("sample's tools %+v, want echo as the pool", s.Tools)
		}
		if s.Pool.CallsPerSec > 0 && (s.Pool.P50 <= 0 || s.Pool.P99 < s.Pool.P50) {
			t.Errorf("sample %v: p50 %v p99 %v", s.At, s.Pool.P50, s.Pool.P99)
		}
	}
	if calls != n || errs != n/3 || !both {
		t.Errorf("samples hold %v results and %v transient errors, want %d and %d (each once); both replicas: %v", calls, errs, n, n/3, both)
	}
}

// Range returns the hour kept, oldest first, from since on; a message that
// is not a sample is skipped.
func TestRangeReturnsTheHour(t *testing.T) {
	t.Parallel()
	j := setup(t, "echo", 0)
	m := start(t, backlog.Config{JetStream: j, SampleEvery: time.Hour, Keep: 2 * time.Hour})
	now := time.Now().Truncate(10 * time.Second)
	for i := 359; i >= 0; i-- { // the last hour, every 10 s, oldest first
		at := now.Add(-time.Duration(i) * 10 * time.Second)
		s := map[string]any{"at": at, "every_s": 10, "instance": "orch-a",
			"tools": []map[string]any{{"tool": "echo", "queued": i, "state": "ok"}}}
		data, _ := json.Marshal(s)
		if _, err := j.Publish(ctxFor(t), backlog.SubjectDefault, data); err != nil {
			t.Fatal(err)
		}
		if i == 100 {
			if _, err := j.Publish(ctxFor(t), backlog.SubjectDefault, []byte("not a sample")); err != nil {
				t.Fatal(err)
			}
		}
	}
	all, err := m.Range(ctxFor(t), now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 360 || !all[0].At.Equal(now.Add(-3590*time.Second)) || !all[359].At.Equal(now) || all[0].Pool.Queued != 359 {
		t.Fatalf("Range of the hour: %d samples, first %+v", len(all), all[0])
	}
	last10, err := m.Range(ctxFor(t), now.Add(-10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(last10) != 61 || !last10[0].At.Equal(now.Add(-10*time.Minute)) {
		t.Errorf("Range of 10 minutes: %d samples from %v", len(last10), last10[0].At)
	}
}

// A Config with a wrong field is refused, naming it.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  backlog.Config
		want string
	}{
		{backlog.Config{}, "Config.JetStream"},
	} {
		if _, err := backlog.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
	_, _, jj := natstest.StartProvisioned(t)
	for _, tc := range []struct {
		cfg  backlog.Config
		want string
	}{
		{backlog.Config{BacklogAge: -1}, "Config.BacklogAge"},
		{backlog.Config{StallAfter: -1}, "Config.StallAfter"},
		{backlog.Config{DrainWindow: -1}, "Config.DrainWindow"},
		{backlog.Config{SampleEvery: 1500 * time.Millisecond}, "Config.SampleEvery"},
		{backlog.Config{SampleEvery: time.Minute, Keep: time.Minute}, "Config.Keep"},
		{backlog.Config{Replicas: 7}, "Config.Replicas"},
	} {
		tc.cfg.JetStream = jj
		if _, err := backlog.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}
