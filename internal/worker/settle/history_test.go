package settle_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

func TestHistoryKey(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^[-/_=\.a-zA-Z0-9]+$`)
	ids := []string{"toolu_01ABCdef", "a", "call-1_x", "a.b", "a b", "ключ", "a/b", "=abc", "a\u00e9", "..", "*", ">"}
	seen := map[string]string{}
	for _, id := range ids {
		k := settle.HistoryKey(id)
		if !valid.MatchString(k) || strings.HasPrefix(k, ".") || strings.HasSuffix(k, ".") {
			t.Errorf("HistoryKey(%q) = %q: not a valid KV key", id, k)
		}
		if other, dup := seen[k]; dup {
			t.Errorf("HistoryKey(%q) = HistoryKey(%q) = %q", id, other, k)
		}
		seen[k] = id
	}
	if k := settle.HistoryKey("toolu_01ABCdef"); k != "toolu_01ABCdef" {
		t.Errorf("a tool_use id is its own key, got %q", k)
	}
}

func TestHistoryRecordLoadDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := openHistory(t, b.js)
	ctx := ctxFor(t)
	if h.TTL() != settle.HistoryTTLDefault {
		t.Errorf("TTL = %v, want %v", h.TTL(), settle.HistoryTTLDefault)
	}
	id := "call with spaces/and.dots"
	start := time.Now().Truncate(time.Millisecond)
	var want []settle.Attempt
	for n := 1; n <= 3; n++ {
		a := settle.Attempt{N: n, WorkerID: "w" + string(rune('0'+n)), Class: envelope.ClassTransient, Code: "http_503",
			Message: "its service is unavailable", Started: start.Add(time.Duration(n) * time.Second), Duration: time.Millisecond}
		want = append(want, a)
		got, err := h.Record(ctx, id, a)
		if err != nil {
			t.Fatalf("Record %d: %v", n, err)
		}
		if len(got) != n {
			t.Fatalf("Record %d returned %d attempts", n, len(got))
		}
	}
	// The same attempt recorded twice (a retried write) is kept once.
	if got, err := h.Record(ctx, id, want[2]); err != nil || len(got) != 3 {
		t.Fatalf("Record again: %d attempts, %v; want 3", len(got), err)
	}
	got, err := h.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(got, want, func(a, b settle.Attempt) bool {
		return a.N == b.N && a.WorkerID == b.WorkerID && a.Code == b.Code && a.Started.Equal(b.Started) && a.Duration == b.Duration
	}) {
		t.Errorf("Load = %+v\nwant %+v", got, want)
	}
	if other, err := h.Load(ctx, "never-failed"); err != nil || len(other) != 0 {
		t.Errorf("Load of an unknown call = %v, %v; want nothing", other, err)
	}
	if err := h.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got, err := h.Load(ctx, id); err != nil || len(got) != 0 {
		t.Errorf("Load after Delete = %v, %v; want nothing", got, err)
	}
	// A call can fail again after its record was deleted.
	if got, err := h.Record(ctx, id, want[0]); err != nil || len(got) != 1 {
		t.Errorf("Record after Delete = %d attempts, %v; want 1", len(got), err)
	}
}

// Writers racing on one call's record all get their attempt in: the
// revision check turns a lost update into a retry.
func TestHistoryConcurrentWriters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Two handles on two connections, like two workers.
	h1 := openHistory(t, b.js)
	j2, err := js.New(natstest.Connect(t, b.srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	h2 := openHistory(t, j2)
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		h := h1
		if i%2 == 1 {
			h = h2
		}
		wg.Go(func() {
			if _, err := h.Record(ctxFor(t), "raced", settle.Attempt{N: i + 1, Started: time.Now()}); err != nil {
				t.Errorf("Record %d: %v", i+1, err)
			}
		})
	}
	wg.Wait()
	got, err := h1.Load(ctxFor(t), "raced")
	if err != nil {
		t.Fatal(err)
	}
	var ns []int
	for _, a := range got {
		ns = append(ns, a.N)
	}
	slices.Sort(ns)
	if len(ns) != n || ns[0] != 1 || ns[n-1] != n {
		t.Errorf("attempts recorded = %v, want 1..%d", ns, n)
	}
}

func TestHistoryBucketSettings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h, err := settle.OpenHistory(ctxFor(t), b.js, settle.HistoryConfig{TTL: time.Hour, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	if h.TTL() != time.Hour {
		t.Errorf("TTL = %v, want 1h", h.TTL())
	}
	// An existing bucket keeps its own TTL.
	again, err := settle.OpenHistory(ctxFor(t), b.js, settle.HistoryConfig{TTL: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if again.TTL() != time.Hour {
		t.Errorf("TTL of the existing bucket = %v, want 1h", again.TTL())
	}
	kv, err := b.js.KeyValue(ctxFor(t), settle.HistoryBucketDefault)
	if err != nil {
		t.Fatalf("bucket %s: %v", settle.HistoryBucketDefault, err)
	}
	st, _ := kv.Status(ctxFor(t))
	if st.TTL() != time.Hour || st.History() != 1 {
		t.Errorf("bucket TTL, history = %v, %d; want 1h, 1", st.TTL(), st.History())
	}
	// MaxAttempts keeps the newest.
	for n := 1; n <= 3; n++ {
		_, _ = h.Record(ctxFor(t), "capped", settle.Attempt{N: n, Started: time.Now()})
	}
	got, _ := h.Load(ctxFor(t), "capped")
	if len(got) != 2 || got[0].N != 2 || got[1].N != 3 {
		t.Errorf("capped attempts = %+v, want 2 and 3", got)
	}

	for _, cfg := range []settle.HistoryConfig{{TTL: time.Second}, {Replicas: 2}, {MaxAttempts: -1}} {
		if _, err := settle.OpenHistory(ctxFor(t), b.js, cfg); err == nil {
			t.Errorf("OpenHistory(%+v) accepted a bad config", cfg)
		}
	}
}

// pool is a dispatcher and workers with a history on one server.
type pool struct {
	*bundle
	reg     *tools.Registry
	d       *dispatch.Dispatcher
	history *settle.History
}

func newPool(t *testing.T, history worker.History, ts ...tools.Tool) *pool {
	t.Helper()
	b := setup(t)
	p := &pool{bundle: b, reg: tools.NewRegistry(), history: openHistory(t, b.js)}
	for _, tl := range ts {
		if err := p.reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	if history == nil {
		history = p.history
	}
	for range 2 {
		p.startWorker(t, history)
	}
	p.d = pooltest.StartOrchestrator(t, b.js.Conn(), discovery.RegistryCatalog(p.reg)).Dispatcher()
	return p
}

func (p *pool) startWorker(t *testing.T, history worker.History) *worker.Worker {
	t.Helper()
	return pooltest.StartServer(t, p.srv.ClientURL(), p.reg, func(c *pooltest.ServerConfig) { c.Worker.History = history }).Workers()[0]
}

func (p *pool) call(t *testing.T, tool, input string) (string, envelope.Result) {
	t.Helper()
	id := newID()
	res, err := p.d.Dispatch(ctxFor(t), "", []envelope.ToolUseBlock{{Type: "tool_use", ID: id, Name: tool, Input: json.RawMessage(input)}})
	if err != nil {
		t.Fatalf("Dispatch %s: %v", tool, err)
	}
	return id, res[0]
}

// failing is a tool whose first failFor attempts of each call fail with
// HTTP 503 and the rest succeed; it counts executions.
func failing(name string, failFor int, maxAttempts int, execs *atomic.Int64) tools.Tool {
	return tools.Tool{
		Name: name, Description: "fails, then works", Idempotent: true,
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Timeout:     2 * time.Second,
		Retry:       classify.Policy{MaxAttempts: maxAttempts, BaseDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond},
		Handler: func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
			execs.Add(1)
			ci, _ := tools.CallInfoFrom(ctx)
			if ci.Attempt <= failFor {
				return tools.Output{}, &classify.HTTPError{StatusCode: 503}
			}
			return tools.Text("ok"), nil
		},
	}
}

// bucketKeys lists the keys of the attempts bucket.
func bucketKeys(t *testing.T, j js.JetStream) []string {
	t.Helper()
	kv, err := j.KeyValue(ctxFor(t), settle.HistoryBucketDefault)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.Keys(ctxFor(t))
	if errors.Is(err, js.ErrNoKeysFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// An exhausted call's dead letter carries one record per attempt, whichever
// worker ran it, with the failure times and the headers.
func TestExhaustedDeadLetterCarriesEveryAttempt(t *testing.T) {
	t.Parallel()
	var execs atomic.Int64
	p := newPool(t, nil, failing("down", 100, 3, &execs))
	id, res := p.call(t, "down", `{}`)
	if !res.IsError || res.Code != "http_503" || res.Attempts != 3 {
		t.Fatalf("result = %+v, want is_error http_503 after 3 attempts", res)
	}
	s, err := dlq.NewStore(ctxFor(t), p.js)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := s.List(ctxFor(t), dlq.Filter{})
	if err != nil || len(ls) != 1 {
		t.Fatalf("List = %d letters, %v; want 1", len(ls), err)
	}
	l := ls[0]
	e := l.Entry
	if e == nil || e.Reason != classify.FateExhausted || e.CallID != id || e.Tool != "down" {
		t.Fatalf("entry = %+v, err %v", e, l.Err)
	}
	if len(e.Attempts) != 3 {
		t.Fatalf("entry has %d attempts, want 3: %+v", len(e.Attempts), e.Attempts)
	}
	for i, a := range e.Attempts {
		if a.N != i+1 || a.Class != envelope.ClassTransient || a.Code != "http_503" || a.WorkerID == "" || a.Started.IsZero() || a.Message == "" {
			t.Errorf("attempt %d = %+v", i+1, a)
		}
		if i > 0 && a.Started.Before(e.Attempts[i-1].Started) {
			t.Errorf("attempt %d started before attempt %d", i+1, i)
		}
	}
	if !e.FirstFailure.Equal(e.Attempts[0].Started) || e.LastFailure.Before(e.Attempts[2].Started) {
		t.Errorf("first, last failure = %v, %v; attempts started %v .. %v", e.FirstFailure, e.LastFailure, e.Attempts[0].Started, e.Attempts[2].Started)
	}
	var call envelope.Call
	if err := json.Unmarshal(e.Call, &call); err != nil || call.ID != id {
		t.Errorf("the entry's call is not the original envelope: %v, %s", err, e.Call)
	}
	for h, want := range map[string]string{
		settle.HeaderReason: "exhausted", settle.HeaderTool: "down", settle.HeaderCallID: id,
		settle.HeaderAttempts: "3", settle.HeaderClass: "transient", settle.HeaderCode: "http_503",
	} {
		if got := l.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	for _, h := range []string{settle.HeaderFirstFailure, settle.HeaderLastFailure} {
		if _, err := time.Parse(time.RFC3339Nano, l.Header.Get(h)); err != nil {
			t.Errorf("header %s = %q: %v", h, l.Header.Get(h), err)
		}
	}
}

// A call that succeeds at once writes nothing to the bucket; one that
// failed before it succeeded has its failures recorded.
func TestSuccessWritesNoHistory(t *testing.T) {
	t.Parallel()
	var execs atomic.Int64
	p := newPool(t, nil, failing("fine", 0, 3, &execs), failing("wobbly", 1, 3, &execs))
	for range 5 {
		if _, res := p.call(t, "fine", `{}`); res.IsError {
			t.Fatalf("fine failed: %+v", res)
		}
	}
	if keys := bucketKeys(t, p.js); len(keys) != 0 {
		t.Errorf("successful calls wrote history keys %v", keys)
	}
	id, res := p.call(t, "wobbly", `{}`)
	if res.IsError || res.Attempts != 2 {
		t.Fatalf("wobbly = %+v, want success on attempt 2", res)
	}
	got, err := p.history.Load(ctxFor(t), envelope.CallKey("", "", id, "wobbly", []byte(`{}`)))
	if err != nil || len(got) != 1 || got[0].N != 1 || got[0].Code != "http_503" {
		t.Errorf("history of wobbly = %+v, %v; want attempt 1's 503", got, err)
	}
	if n := streamMsgs(t, p.js, jetstream.StreamDLQ); n != 0 {
		t.Errorf("TOOL_DLQ holds %d, want 0", n)
	}
}

// brokenHistory fails every read and write.
type brokenHistory struct{ calls atomic.Int64 }

func (b *brokenHistory) Record(context.Context, string, settle.Attempt) ([]settle.Attempt, error) {
	b.calls.Add(1)
	return nil, errors.New("bucket unavailable")
}

func (b *brokenHistory) Load(context.Context, string) ([]settle.Attempt, error) {
	b.calls.Add(1)
	return nil, errors.New("bucket unavailable")
}

func (b *brokenHistory) Begin(context.Context, string, settle.Started, time.Time) (*settle.Started, error) {
	b.calls.Add(1)
	return nil, errors.New("bucket unavailable")
}

func (b *brokenHistory) StartedOf(context.Context, string) (*settle.Started, error) {
	b.calls.Add(1)
	return nil, errors.New("bucket unavailable")
}

// A history that fails loses no call: it is retried and dead-lettered as
// usual, with its last attempt.
func TestBrokenHistoryLosesNothing(t *testing.T) {
	t.Parallel()
	var execs atomic.Int64
	broken := &brokenHistory{}
	p := newPool(t, broken, failing("down", 100, 3, &execs))
	_, res := p.call(t, "down", `{}`)
	if !res.IsError || res.Attempts != 3 || execs.Load() != 3 {
		t.Fatalf("result = %+v after %d executions; want is_error after 3", res, execs.Load())
	}
	if broken.calls.Load() < 3 {
		t.Errorf("the history was asked %d times, want at least 3", broken.calls.Load())
	}
	s, _ := dlq.NewStore(ctxFor(t), p.js)
	ls, err := s.List(ctxFor(t), dlq.Filter{})
	if err != nil || len(ls) != 1 || ls[0].Entry == nil {
		t.Fatalf("List = %d, %v; want 1 entry", len(ls), err)
	}
	if e := ls[0].Entry; len(e.Attempts) != 1 || e.Attempts[0].N != 3 || e.AttemptCount() != 3 {
		t.Errorf("entry attempts = %+v (count %d), want the last one, count 3", e.Attempts, e.AttemptCount())
	}
}

// Begin marks an attempt as started; another delivery finds the mark until
// the attempt reports (Record of the same attempt clears it).
func TestHistoryBegin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := openHistory(t, b.js)
	ctx := ctxFor(t)
	key := envelope.CallKey("", "s", "call_0", "send_mail", []byte(`{}`))
	until := time.Now().Add(time.Minute)
	first := settle.Started{Seq: 7, N: 1, WorkerID: "w1", At: time.Now().Truncate(time.Millisecond)}
	if prior, err := h.Begin(ctx, key, first, until); err != nil || prior != nil {
		t.Fatalf("first Begin = %+v, %v; want nil, nil", prior, err)
	}
	if prior, err := h.Begin(ctx, key, first, until); err != nil || prior != nil {
		t.Fatalf("Begin of the same delivery again = %+v, %v; want nil, nil", prior, err)
	}
	for _, other := range []settle.Started{{Seq: 7, N: 2}, {Seq: 9, N: 1}} {
		prior, err := h.Begin(ctx, key, other, until)
		if err != nil || prior == nil || prior.Seq != 7 || prior.N != 1 || prior.WorkerID != "w1" {
			t.Errorf("Begin of delivery %+v = %+v, %v; want the first attempt's marker", other, prior, err)
		}
	}
	if s, err := h.StartedOf(ctx, key); err != nil || s == nil || s.N != 1 {
		t.Errorf("StartedOf = %+v, %v; want attempt 1", s, err)
	}
	// Attempt 1 reports a failure: attempt 2 may start.
	if _, err := h.Record(ctx, key, settle.Attempt{N: 1, Code: "http_503", Started: first.At}); err != nil {
		t.Fatal(err)
	}
	if s, err := h.StartedOf(ctx, key); err != nil || s != nil {
		t.Errorf("StartedOf after the attempt reported = %+v, %v; want nil", s, err)
	}
	if prior, err := h.Begin(ctx, key, settle.Started{Seq: 7, N: 2}, until); err != nil || prior != nil {
		t.Errorf("Begin of attempt 2 after attempt 1 reported = %+v, %v; want nil, nil", prior, err)
	}
	if as, err := h.Load(ctx, key); err != nil || len(as) != 1 {
		t.Errorf("Load = %+v, %v; want attempt 1", as, err)
	}
}

// TestHistoryBeginTellsRedeliveryWithSameCountByToken: a NATS server killed
// before it stored a delivery hands the call out again with the same stream
// sequence and delivery count, while the first delivery may still run. The
// markers' tokens tell the two apart: the second delivery finds the first's
// marker, and the same delivery (an earlier try of its own Begin) does not.
func TestHistoryBeginTellsRedeliveryWithSameCountByToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := openHistory(t, b.js)
	ctx := ctxFor(t)
	key := envelope.CallKey("", "s", "call_1", "send_mail", []byte(`{}`))
	until := time.Now().Add(time.Minute)
	first := settle.Started{Seq: 7, N: 1, WorkerID: "w1", At: time.Now(), Token: "a1"}
	if prior, err := h.Begin(ctx, key, first, until); err != nil || prior != nil {
		t.Fatalf("first Begin = %+v, %v; want nil, nil", prior, err)
	}
	if prior, err := h.Begin(ctx, key, first, until); err != nil || prior != nil {
		t.Fatalf("Begin of the same delivery again = %+v, %v; want nil, nil", prior, err)
	}
	again := settle.Started{Seq: 7, N: 1, WorkerID: "w2", At: time.Now(), Token: "b2"}
	prior, err := h.Begin(ctx, key, again, until)
	if err != nil || prior == nil || prior.Token != "a1" || prior.WorkerID != "w1" {
		t.Errorf("Begin of a delivery with the same sequence and count but another token = %+v, %v; want the first's marker", prior, err)
	}
}
