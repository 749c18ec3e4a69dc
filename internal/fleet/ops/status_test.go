package ops_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const waitLong = 60 * time.Second

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	return ctx
}

// fakeLive is a WorkerSource with fixed workers.
type fakeLive map[string][]string

func (f fakeLive) Names(context.Context) []string {
	var out []string
	for k := range f {
		out = append(out, k)
	}
	return out
}

func (f fakeLive) Workers(_ context.Context, tool string) []discovery.Announcement {
	var out []discovery.Announcement
	for _, id := range f[tool] {
		out = append(out, discovery.Announcement{WorkerID: id})
	}
	return out
}

func find(t *testing.T, st []ops.ToolStatus, tool string) ops.ToolStatus {
	t.Helper()
	for _, s := range st {
		if s.Tool == tool {
			return s
		}
	}
	t.Fatalf("no status for %s in %+v", tool, st)
	return ops.ToolStatus{}
}

func TestStatusCounts(t *testing.T) {
	t.Parallel()
	_, _, j := natstest.StartProvisioned(t)
	ctx := ctxFor(t)
	cons, err := jetstream.EnsureConsumer(ctx, j, jetstream.ConsumerSpec{Tool: "search"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := j.Publish(ctx, jetstream.CallSubject("search"), []byte(`{"n":`+strconv.Itoa(i)+`}`)); err != nil {
			t.Fatal(err)
		}
	}
	// One delivered and not acked: in flight.
	batch, err := cons.Fetch(1, js.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range batch.Messages() {
	}
	for _, tool := range []string{"search", "search", "gone"} {
		e := settle.NewEntry(classify.FateExhausted, tool, "", []byte(`{}`))
		m, _ := e.Msg(jetstream.DLQSubject(tool), strconv.FormatInt(time.Now().UnixNano(), 10))
		if _, err := j.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// The server counts a consumer's pending calls as it takes in the
	// stream's new messages, on its own goroutine: on a loaded machine a
	// read right after the publishes can find them not counted yet.
	var st []ops.ToolStatus
	for deadline := time.Now().Add(10 * time.Second); ; {
		st, err = ops.Status(ctx, j, fakeLive{"search": {"w1", "w2"}, "echo": {"w1"}})
		if err != nil {
			t.Fatal(err)
		}
		if s := find(t, st, "search"); s.Pending == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(st) != 3 || st[0].Tool != "echo" || st[1].Tool != "gone" || st[2].Tool != "search" {
		t.Fatalf("tools = %+v, want echo, gone, search", st)
	}
	s := find(t, st, "search")
	if !s.Consumer || s.Pending != 2 || s.InFlight != 1 || s.Redelivered != 0 || s.DeadLetters != 2 || len(s.Workers) != 2 || s.Paused(time.Now()) {
		t.Errorf("search = %+v", s)
	}
	if g := find(t, st, "gone"); g.Consumer || g.DeadLetters != 1 || len(g.Workers) != 0 {
		t.Errorf("gone = %+v", g)
	}
	if e := find(t, st, "echo"); e.Consumer || e.DeadLetters != 0 || len(e.Workers) != 1 {
		t.Errorf("echo = %+v", e)
	}
	if _, err := ops.Status(ctx, j, nil); err != nil {
		t.Errorf("Status without live workers: %v", err)
	}
}

// limited is a tool whose downstream rate-limits the first attempt of
// call "1" with 429 and Retry-After: 5; it records when each call's
// attempts started.
type limited struct {
	mu     sync.Mutex
	starts map[string][]time.Time
	failAt time.Time
}

func (l *limited) tool() tools.Tool {
	return tools.Tool{
		Name: "limited", Description: "rate limited",
		InputSchema:     json.RawMessage(`{"type":"object","properties":{"n":{"type":"string"}},"required":["n"]}`),
		Timeout:         2 * time.Second,
		Retry:           classify.Policy{MaxAttempts: 3, BaseDelay: 50 * time.Millisecond, MaxDelay: 10 * time.Second},
		PauseOn429Above: time.Second,
		Handler: func(ctx context.Context, input json.RawMessage) (tools.Output, error) {
			var in struct{ N string }
			_ = json.Unmarshal(input, &in)
			ci, _ := tools.CallInfoFrom(ctx)
			now := time.Now()
			l.mu.Lock()
			l.starts[in.N] = append(l.starts[in.N], now)
			l.mu.Unlock()
			if in.N == "1" && ci.Attempt == 1 {
				l.mu.Lock()
				l.failAt = now
				l.mu.Unlock()
				return tools.Output{}, &classify.HTTPError{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"5"}}}
			}
			return tools.Text("ok " + in.N), nil
		},
	}
}

// A 429 with Retry-After: 5 above the tool's threshold pauses the tool's
// consumer on the server for about 5 s: no worker of the fleet gets any of
// its calls meanwhile, including one published during the pause; then it
// resumes by itself and both calls succeed.
func TestRateLimitPausesTheFleet(t *testing.T) {
	t.Parallel()
	srv, _, j := natstest.StartProvisioned(t)
	l := &limited{starts: map[string][]time.Time{}}
	reg := tools.NewRegistry()
	if err := reg.Register(l.tool()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		pooltest.StartServer(t, srv.ClientURL(), reg)
	}
	d := pooltest.StartOrchestrator(t, j.Conn(), discovery.RegistryCatalog(reg)).Dispatcher()

	results := make(chan envelope.Result, 2)
	send := func(n string) {
		go func() {
			res, err := d.Dispatch(ctxFor(t), "", []envelope.ToolUseBlock{{Type: "tool_use", ID: "toolu_pause_" + n, Name: "limited",
				Input: json.RawMessage(`{"n":"` + n + `"}`)}})
			if err != nil {
				t.Error(err)
				results <- envelope.Result{}
				return
			}
			results <- res[0]
		}()
	}
	send("1")

	// The consumer is paused on the server.
	var info *js.ConsumerInfo
	deadline := time.Now().Add(waitLong)
	for {
		cons, err := j.Consumer(ctxFor(t), jetstream.StreamCalls, jetstream.ConsumerName("limited"))
		if err == nil {
			if info, err = cons.Info(ctxFor(t)); err == nil && info.Paused {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the consumer was never paused")
		}
		time.Sleep(10 * time.Millisecond)
	}
	pauseUntil := *info.Config.PauseUntil
	l.mu.Lock()
	failAt := l.failAt
	l.mu.Unlock()
	if p := pauseUntil.Sub(failAt); p < 5*time.Second-100*time.Millisecond || p > 7*time.Second {
		t.Errorf("paused for %v after the 429, want about 5s (the Retry-After)", p)
	}
	st, err := ops.Status(ctxFor(t), j, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := find(t, st, "limited"); s.PausedUntil == nil || !s.PausedUntil.Equal(pauseUntil) {
		t.Errorf("status = %+v, want paused until %v", s, pauseUntil)
	}

	// A call published during the pause waits for its end.
	send("2")
	for range 2 {
		select {
		case res := <-results:
			if res.IsError {
				t.Errorf("result = %+v, want success", res)
			}
		case <-time.After(waitLong):
			t.Fatal("no result")
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.starts["1"]) != 2 || len(l.starts["2"]) != 1 {
		t.Fatalf("attempts started: %v", l.starts)
	}
	// The server's clock and ours are the same machine's.
	for _, at := range []time.Time{l.starts["1"][1], l.starts["2"][0]} {
		if at.Before(pauseUntil) {
			t.Errorf("a call started at %v, during the pause (until %v)", at.Format(time.StampMicro), pauseUntil.Format(time.StampMicro))
		}
	}
	cons, err := j.Consumer(ctxFor(t), jetstream.StreamCalls, jetstream.ConsumerName("limited"))
	if err != nil {
		t.Fatal(err)
	}
	if info, err := cons.Info(ctxFor(t)); err != nil || info.Paused {
		t.Errorf("consumer still paused after the pause: %+v, %v", info, err)
	}
}
