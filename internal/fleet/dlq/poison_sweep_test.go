package dlq_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// toolConsumer makes tool's consumer as a worker would, with a short ack
// wait so deliveries run out fast.
func toolConsumer(t *testing.T, j js.JetStream, tool string, maxDeliver int, ackWait time.Duration) js.Consumer {
	t.Helper()
	c, err := j.CreateOrUpdateConsumer(ctxFor(t), jetstream.StreamCalls, js.ConsumerConfig{
		Durable: jetstream.ConsumerName(tool), FilterSubject: jetstream.CallSubject(tool),
		AckPolicy: js.AckExplicitPolicy, AckWait: ackWait, MaxDeliver: maxDeliver,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// queueCall publishes a call to tool answered on replyTo's result subject
// and returns its stream sequence.
func queueCall(t *testing.T, j js.JetStream, id, tool, replyTo string) uint64 {
	t.Helper()
	ack, err := j.Publish(ctxFor(t), jetstream.CallSubject(tool), callData(t, id, tool, `{"text":"`+id+`"}`, replyTo), js.WithMsgID(id))
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// exhaust takes every delivery of the call at seq, the only call of its
// tool, without answering, as workers that crash on it would, until the
// server gave up on it: it was delivered and is no longer pending. The
// consumer's reported ack floor stays below it.
func exhaust(t *testing.T, c js.Consumer, seq uint64) {
	t.Helper()
	takeUntil(t, c, "the call to reach MaxDeliver", func(info *js.ConsumerInfo) bool {
		return info.Delivered.Stream >= seq && info.NumAckPending == 0
	})
}

// takeUntil takes deliveries of c one at a time without answering them
// until done holds for the consumer's state.
func takeUntil(t *testing.T, c js.Consumer, what string, done func(*js.ConsumerInfo) bool) {
	t.Helper()
	eventually(t, what, func() bool {
		batch, err := c.Fetch(1, js.FetchMaxWait(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for range batch.Messages() {
		}
		info, err := c.Info(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		return done(info)
	})
}

// startSweeper starts a watcher that sweeps every interval, with
// advisories when advisories is true, and tweaks its config further. Found
// poison calls go to the returned channel.
func startSweeper(t *testing.T, b *bundle, advisories bool, interval time.Duration, tweaks ...func(*dlq.PoisonConfig)) (*dlq.PoisonWatcher, <-chan dlq.PoisonCall) {
	t.Helper()
	nc := natstest.Connect(t, b.srv.ClientURL())
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	found := make(chan dlq.PoisonCall, 16)
	cfg := dlq.PoisonConfig{
		JetStream: j, Logger: natstest.Logger(t), Timeout: 5 * time.Second,
		SweepInterval: interval, SweepConfirm: 50 * time.Millisecond,
		OnPoison: func(pc dlq.PoisonCall) { found <- pc },
	}
	if advisories {
		cfg.Conn = nc
	}
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	w := runWatcher(t, cfg)
	return w, found
}

// lastResult returns the last result published for instance, nil when
// there is none.
func lastResult(t *testing.T, j js.JetStream, instance string) *envelope.Result {
	t.Helper()
	s, err := j.Stream(ctxFor(t), jetstream.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctxFor(t), jetstream.ResultFilter(instance))
	if errors.Is(err, js.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	res, err := envelope.DecodeResult(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func waitPoison(t *testing.T, found <-chan dlq.PoisonCall) dlq.PoisonCall {
	t.Helper()
	select {
	case pc := <-found:
		return pc
	case <-time.After(waitLong):
		t.Fatal("no poison call was set aside")
		return dlq.PoisonCall{}
	}
}

// A call reaches MaxDeliver while no watcher runs, so its advisory is
// lost: the sweep a watcher makes at start finds it, dead-letters it,
// answers its caller and empties TOOL_CALLS, with no advisory and long
// before the next sweep.
func TestPoisonSweepAtStartFindsCallMaxedWhileNoWatcherRan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := toolConsumer(t, b.js, "crashy", 2, 100*time.Millisecond)
	id := newID()
	seq := queueCall(t, b.js, id, "crashy", "orch-a")
	exhaust(t, c, seq)
	if n := streamMsgs(t, b.js, jetstream.StreamCalls); n != 1 {
		t.Fatalf("TOOL_CALLS holds %d calls after MaxDeliver, want the undelivered one", n)
	}

	_, found := startSweeper(t, b, true, time.Hour)
	pc := waitPoison(t, found)
	if pc.Tool != "crashy" || pc.CallID != id || pc.StreamSeq != seq || pc.Deliveries != 2 || !pc.Answered || !pc.Swept {
		t.Errorf("poison call = %+v; want call %s at %d, 2 deliveries (MaxDeliver), answered, swept", pc, id, seq)
	}
	res := lastResult(t, b.js, "orch-a")
	if res == nil || res.CallID != id || !res.IsError || res.Class != envelope.ClassInternal ||
		res.Code != classify.CodePoison || res.Attempts != 2 {
		t.Fatalf("result = %+v; want is_error internal poison for %s after 2 attempts", res, id)
	}
	if text := res.Content.Text(); !strings.Contains(text, "crashy") || !strings.Contains(text, "Do not call it again") {
		t.Errorf("content = %q", text)
	}
	ls, err := newStore(t, b).List(ctxFor(t), dlq.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].Entry == nil || ls[0].Entry.Reason != classify.FatePoison || ls[0].Entry.CallID != id ||
		ls[0].Entry.Tool != "crashy" || ls[0].Entry.Deliveries != 2 || ls[0].Entry.SourceSeq != seq {
		t.Fatalf("dead letters = %+v; want one poison entry for %s", ls, id)
	}
	if n := streamMsgs(t, b.js, jetstream.StreamCalls); n != 0 {
		t.Errorf("TOOL_CALLS holds %d calls, want 0", n)
	}
}

// With advisories off, a call that reaches MaxDeliver after the watcher
// started is found by the next sweep: at most one sweep that was already
// running when it maxed out misses it.
func TestPoisonSweepWithoutAdvisories(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w, found := startSweeper(t, b, false, 200*time.Millisecond)
	c := toolConsumer(t, b.js, "crashy", 1, 100*time.Millisecond)
	id := newID()
	seq := queueCall(t, b.js, id, "crashy", "orch-b")
	exhaust(t, c, seq)
	before := w.Sweeps()

	pc := waitPoison(t, found)
	if after := w.Sweeps(); after > before+1 {
		t.Errorf("the call was found by sweep %d; it maxed out during sweep %d, so sweep %d at the latest should have", after+1, before+1, before+2)
	}
	if pc.CallID != id || pc.StreamSeq != seq || pc.Deliveries != 1 || !pc.Swept || !pc.Answered {
		t.Errorf("poison call = %+v", pc)
	}
	if res := lastResult(t, b.js, "orch-b"); res == nil || res.CallID != id || res.Code != classify.CodePoison {
		t.Errorf("result = %+v; want the poison result of %s", res, id)
	}
	eventually(t, "TOOL_CALLS to empty", func() bool { return streamMsgs(t, b.js, jetstream.StreamCalls) == 0 })
}

// fetchAll fetches n calls of c and returns them by call id.
func fetchAll(t *testing.T, c js.Consumer, n int) map[string]js.Msg {
	t.Helper()
	batch, err := c.Fetch(n, js.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]js.Msg{}
	for m := range batch.Messages() {
		call, err := envelope.DecodeCall(m.Data(), envelope.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		got[call.ID] = m
	}
	if len(got) != n {
		t.Fatalf("fetched %d calls, want %d", len(got), n)
	}
	return got
}

// A poison call that was not the oldest in flight when it reached
// MaxDeliver: once the older call is acked, the consumer's ack floor moves
// past it while a younger call is still in flight, and the sweep finds it
// there, leaving the younger call alone.
func TestPoisonSweepFindsCallBelowAckFloorWhileOthersRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := toolConsumer(t, b.js, "mixed", 2, 200*time.Millisecond)
	older, poison, younger := newID(), newID(), newID()
	queueCall(t, b.js, older, "mixed", "orch-m")
	poisonSeq := queueCall(t, b.js, poison, "mixed", "orch-m")
	youngerSeq := queueCall(t, b.js, younger, "mixed", "orch-m")
	got := fetchAll(t, c, 3)
	// The older and the younger call wait to be retried; the poison call
	// is never answered.
	for _, id := range []string{older, younger} {
		if err := got[id].NakWithDelay(time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	takeUntil(t, c, "the poison call to reach MaxDeliver", func(info *js.ConsumerInfo) bool {
		return info.NumAckPending == 2
	})
	// A worker acks the older call on its retry (the client library
	// refuses to ack a message it NAKed, so ack on the wire).
	if _, err := b.nc.Request(got[older].Reply(), []byte("+ACK"), waitLong); err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream < poisonSeq || info.NumAckPending != 1 {
		t.Fatalf("ack floor %d, %d pending; want the floor past the poison call (%d) and the younger call pending",
			info.AckFloor.Stream, info.NumAckPending, poisonSeq)
	}

	_, found := startSweeper(t, b, true, time.Hour)
	pc := waitPoison(t, found)
	if pc.CallID != poison || pc.StreamSeq != poisonSeq || pc.Deliveries != 2 || !pc.Swept {
		t.Errorf("poison call = %+v; want %s at %d", pc, poison, poisonSeq)
	}
	calls, err := b.js.Stream(ctxFor(t), jetstream.StreamCalls)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := calls.GetMsg(ctxFor(t), youngerSeq); err != nil {
		t.Errorf("the younger call: %v; want it still queued", err)
	}
	if _, err := calls.GetMsg(ctxFor(t), poisonSeq); !errors.Is(err, js.ErrMsgNotFound) {
		t.Errorf("the poison call: %v; want it removed", err)
	}
	if res := lastResult(t, b.js, "orch-m"); res == nil || res.CallID != poison || res.Code != classify.CodePoison {
		t.Errorf("result = %+v; want the poison result of %s only", res, poison)
	}
}

// Sweeps leave alone what is not poison: a call in flight (delivered, not
// acked, below MaxDeliver), calls still queued behind it or behind an idle
// consumer, and acked calls; meanwhile a maxed call of another tool is set
// aside, so the sweeps did run over all of them.
func TestPoisonSweepLeavesLiveCalls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// busy: one call acked, one in flight, one queued.
	busy := toolConsumer(t, b.js, "busy", 3, time.Minute)
	acked, inFlight := newID(), newID()
	queueCall(t, b.js, acked, "busy", "orch-live")
	inFlightSeq := queueCall(t, b.js, inFlight, "busy", "orch-live")
	if err := fetchAll(t, busy, 2)[acked].DoubleAck(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	queuedSeq := queueCall(t, b.js, newID(), "busy", "orch-live")
	// idle: one call acked, nothing pending, one queued.
	idle := toolConsumer(t, b.js, "idle", 3, time.Minute)
	idleAcked := newID()
	queueCall(t, b.js, idleAcked, "idle", "orch-live")
	if err := fetchAll(t, idle, 1)[idleAcked].DoubleAck(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	idleQueuedSeq := queueCall(t, b.js, newID(), "idle", "orch-live")

	w, found := startSweeper(t, b, false, 50*time.Millisecond)
	crashy := toolConsumer(t, b.js, "crashy", 1, 100*time.Millisecond)
	poison := newID()
	exhaust(t, crashy, queueCall(t, b.js, poison, "crashy", "orch-crashy"))
	if pc := waitPoison(t, found); pc.CallID != poison {
		t.Fatalf("set aside %+v, want only %s", pc, poison)
	}
	n := w.Sweeps()
	eventually(t, "three more sweeps", func() bool { return w.Sweeps() >= n+3 })

	select {
	case pc := <-found:
		t.Errorf("a live call was set aside: %+v", pc)
	default:
	}
	if got := streamMsgs(t, b.js, jetstream.StreamDLQ); got != 1 {
		t.Errorf("TOOL_DLQ holds %d, want only the poison call", got)
	}
	if res := lastResult(t, b.js, "orch-live"); res != nil {
		t.Errorf("a live call was answered: %+v", res)
	}
	calls, err := b.js.Stream(ctxFor(t), jetstream.StreamCalls)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{inFlightSeq, queuedSeq, idleQueuedSeq} {
		if _, err := calls.GetMsg(ctxFor(t), seq); err != nil {
			t.Errorf("call %d: %v; want it still queued", seq, err)
		}
	}
	if got := streamMsgs(t, b.js, jetstream.StreamCalls); got != 3 {
		t.Errorf("TOOL_CALLS holds %d, want the call in flight and the two queued ones", got)
	}
	info, err := busy.Info(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 1 || info.NumPending != 1 {
		t.Errorf("busy consumer: %d in flight, %d queued; want 1 and 1", info.NumAckPending, info.NumPending)
	}
}

// recorder is a slog handler that keeps the records.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.records = append(r.records, rec)
	r.mu.Unlock()
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// count returns how many records at level have a message containing s.
func (r *recorder) count(level slog.Level, s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.records {
		if rec.Level == level && strings.Contains(rec.Message, s) {
			n++
		}
	}
	return n
}

// While the server is down every sweep fails; that is logged at warn level
// once, not once per sweep, and once the server is back the sweeps work
// again and say so.
func TestPoisonSweepOutageWarnsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := &recorder{}
	// Each failing sweep ends at its first request's timeout.
	w, _ := startSweeper(t, b, false, 50*time.Millisecond, func(cfg *dlq.PoisonConfig) {
		cfg.Logger, cfg.Timeout = slog.New(rec), 200*time.Millisecond
	})
	eventually(t, "a sweep", func() bool { return w.Sweeps() >= 1 })
	if n := rec.count(slog.LevelWarn, "sweeping"); n != 0 {
		t.Fatalf("%d sweep warnings while the server runs", n)
	}

	u, err := url.Parse(b.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Dir(b.srv.StoreDir())
	b.srv.Shutdown()
	n := w.Sweeps()
	eventually(t, "four sweeps during the outage", func() bool { return w.Sweeps() >= n+4 })
	if n := rec.count(slog.LevelWarn, "sweeping"); n != 1 {
		t.Errorf("%d sweep warnings during one outage, want 1", n)
	}

	srv, err := embedded.Start(embedded.Options{Listen: u.Host, DataDir: dataDir, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	eventually(t, "the sweeps to work again", func() bool { return rec.count(slog.LevelInfo, "works again") == 1 })
	if n := rec.count(slog.LevelWarn, "sweeping"); n != 1 {
		t.Errorf("%d sweep warnings, want still 1", n)
	}
}

// Config errors name the field; Stop may be called twice.
func TestNewPoisonWatcherConfig(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name string
		cfg  dlq.PoisonConfig
		want string
	}{
		{"no JetStream", dlq.PoisonConfig{Conn: b.nc}, "JetStream"},
		{"nothing to find with", dlq.PoisonConfig{JetStream: b.js, SweepInterval: -1}, "SweepInterval"},
		{"negative confirm", dlq.PoisonConfig{Conn: b.nc, JetStream: b.js, SweepConfirm: -time.Second}, "SweepConfirm"},
		{"negative timeout", dlq.PoisonConfig{Conn: b.nc, JetStream: b.js, Timeout: -time.Second}, "Timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := dlq.NewPoisonWatcher(tc.cfg)
			if err == nil {
				_ = w.Stop(ctxFor(t))
				t.Fatal("made")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %s", err, tc.want)
			}
		})
	}
	// Advisories only, and sweeps only.
	for _, cfg := range []dlq.PoisonConfig{
		{Conn: b.nc, JetStream: b.js, SweepInterval: -1},
		{JetStream: b.js, SweepInterval: time.Millisecond},
	} {
		w, err := dlq.NewPoisonWatcher(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctxFor(t)); err == nil {
			t.Error("a second Start succeeded")
		}
		if err := w.Stop(ctxFor(t)); err != nil {
			t.Errorf("Stop: %v", err)
		}
		select {
		case <-w.Stopped():
		default:
			t.Error("Stopped not closed after Stop")
		}
		if err := w.Stop(ctxFor(t)); err != nil {
			t.Errorf("second Stop: %v", err)
		}
	}
	// Stopped before it started: stopped at once, and it cannot start.
	w, err := dlq.NewPoisonWatcher(dlq.PoisonConfig{JetStream: b.js})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Stop(ctxFor(t)); err != nil {
		t.Errorf("Stop before Start: %v", err)
	}
	<-w.Stopped()
	if err := w.Start(ctxFor(t)); err == nil {
		t.Error("Start after Stop succeeded")
	}
}

// blockingHistory holds each Load until its context ends, and reports the
// context's cause.
type blockingHistory struct {
	loading chan struct{}
	causes  chan error
}

func (h *blockingHistory) Load(ctx context.Context, _ string) ([]settle.Attempt, error) {
	h.loading <- struct{}{}
	<-ctx.Done()
	h.causes <- context.Cause(ctx)
	return nil, ctx.Err()
}

// Stop drains the poison call being handled until its context ends, then
// cancels it with ErrPoisonWatcherStopped; Stopped closes once it returned.
func TestPoisonWatcherStopCancelsWithCause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := toolConsumer(t, b.js, "stuck", 2, 100*time.Millisecond)
	exhaust(t, c, queueCall(t, b.js, newID(), "stuck", "orch-s"))
	h := &blockingHistory{loading: make(chan struct{}, 1), causes: make(chan error, 1)}
	w, err := dlq.NewPoisonWatcher(dlq.PoisonConfig{
		JetStream: b.js, History: h, Logger: natstest.Logger(t), Timeout: time.Hour,
		SweepInterval: time.Hour, SweepConfirm: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.loading:
	case <-time.After(waitLong):
		t.Fatal("the sweep did not take the poison call")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := w.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop with a handling past its context = %v, want context.DeadlineExceeded", err)
	}
	if cause := <-h.causes; !errors.Is(cause, dlq.ErrPoisonWatcherStopped) {
		t.Errorf("the handling ended with cause %v, want dlq.ErrPoisonWatcherStopped", cause)
	}
	select {
	case <-w.Stopped():
	default:
		t.Error("Stopped not closed when Stop returned")
	}
}
