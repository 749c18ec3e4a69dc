package dispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Log messages the tests count.
const (
	logRetrying = "JetStream did not store a call; publishing the turn's unstored calls again"
	logStored   = "calls stored after publishing them again"
)

func TestPublishDenied(t *testing.T) {
	t.Parallel()
	denied := fmt.Errorf("%w: %s", nats.ErrPermissionViolation, `Permissions Violation for Publish to "tools.call.secret"`)
	if !publishDenied(denied, "tools.call.secret") {
		t.Error("the violation for tools.call.secret is not recognised")
	}
	if publishDenied(denied, "tools.call.sec") || publishDenied(denied, "tools.call.secret.x") {
		t.Error("the violation for tools.call.secret is taken for another subject")
	}
	sub := fmt.Errorf("%w: %s", nats.ErrPermissionViolation, `Permissions Violation for Subscription to "tools.call.secret"`)
	if publishDenied(sub, "tools.call.secret") {
		t.Error("a subscribe violation is taken for a publish violation")
	}
	if publishDenied(errors.New(`Publish to "tools.call.secret"`), "tools.call.secret") {
		t.Error("an error that is not a permissions violation is taken for one")
	}
}

// logRecorder is a slog.Handler that keeps every record.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r.Clone())
	h.mu.Unlock()
	return nil
}

// count is the number of records at level with message msg.
func (h *logRecorder) count(level slog.Level, msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.recs {
		if r.Level == level && r.Message == msg {
			n++
		}
	}
	return n
}

// attempt says how scriptedJS answers one publish: ack acknowledges it at
// once (and answers the call), err fails its PubAck, sync fails
// PublishMsgAsync itself; none of them loses it (no PubAck ever).
type attempt struct {
	ack       bool
	err, sync error
}

// scriptedJS is a JetStream whose publishes go as script says, per call id
// and attempt (1, 2, …); an acknowledged call is answered at once.
type scriptedJS struct {
	js.JetStream
	d      *Dispatcher
	script func(id string, n int) attempt

	mu     sync.Mutex
	sent   map[string][]*nats.Msg
	ackied map[string]time.Time
}

func (s *scriptedJS) Conn() *nats.Conn { return nil }

func (s *scriptedJS) PublishMsgAsync(m *nats.Msg, _ ...js.PublishOpt) (js.PubAckFuture, error) {
	c, err := envelope.DecodeCall(m.Data, envelope.DefaultLimits)
	if err != nil {
		return nil, err
	}
	id := c.ID
	s.mu.Lock()
	s.sent[id] = append(s.sent[id], m)
	a := s.script(id, len(s.sent[id]))
	if a.ack {
		s.ackied[id] = time.Now()
	}
	s.mu.Unlock()
	if a.sync != nil {
		return nil, a.sync
	}
	f := scriptedFuture{m: m, ok: make(chan *js.PubAck, 1), err: make(chan error, 1)}
	switch {
	case a.err != nil:
		f.err <- a.err
	case a.ack:
		data, err := envelope.EncodeResult(&envelope.Result{CallID: c.ID, Key: c.Key, Tool: c.Tool, Content: envelope.Text("ok " + c.ID)})
		if err != nil {
			return nil, err
		}
		s.d.handleResult(&resultMsg{subject: jetstream.ResultSubject(c.ReplyTo, c.Key), data: data})
		f.ok <- &js.PubAck{Stream: jetstream.StreamCalls, Sequence: 1}
	}
	return f, nil
}

type scriptedFuture struct {
	m   *nats.Msg
	ok  chan *js.PubAck
	err chan error
}

func (f scriptedFuture) Ok() <-chan *js.PubAck { return f.ok }
func (f scriptedFuture) Err() <-chan error     { return f.err }
func (f scriptedFuture) Msg() *nats.Msg        { return f.m }

// newScripted returns a running dispatcher (no result consumer: scriptedJS
// answers calls itself) publishing through script.
func newScripted(t *testing.T, script func(id string, n int) attempt, mod func(*Config)) (*Dispatcher, *scriptedJS, *logRecorder) {
	t.Helper()
	s := &scriptedJS{script: script, sent: map[string][]*nats.Msg{}, ackied: map[string]time.Time{}}
	logs := &logRecorder{}
	cfg := Config{JS: s, Instance: "scripted", Catalog: discovery.StaticCatalog("echo"), Logger: slog.New(logs),
		MaxQueueDepth: -1, NoQueueWaitAdmission: true, // scriptedJS has no consumers to read queue depths from
		ResultCheckInterval: -1} // nor a result consumer to watch
	if mod != nil {
		mod(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.d = d
	startLocal(t, d)
	return d, s, logs
}

// Calls that fail fast are published again while another call's attempt
// waits out its PubAck timeout: the turn is not held behind the slow one.
// Every publish of a call is the same message, Msg-Id included.
func TestPublishRetriesCallsIndependently(t *testing.T) {
	t.Parallel()
	d, s, logs := newScripted(t, func(id string, n int) attempt {
		switch {
		case id == "lost" && n == 1: // lost with the old leader: no PubAck
			return attempt{}
		case id == "norsp" && n <= 2: // no stream leader yet
			return attempt{err: js.ErrNoStreamResponse}
		case id == "buffer" && n == 1:
			return attempt{sync: nats.ErrReconnectBufExceeded}
		}
		return attempt{ack: true}
	}, func(c *Config) {
		c.PublishTimeout = 2 * time.Second
		c.PublishRetryFor = 20 * time.Second
	})
	start := time.Now()
	res, err := d.Dispatch(timeout(t, 30*time.Second), "s", []envelope.ToolUseBlock{
		use("lost", "echo", `{}`), use("norsp", "echo", `{}`), use("buffer", "echo", `{}`), use("fine", "echo", `{}`),
	})
	if err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	if el := time.Since(start); el < 2*time.Second {
		t.Errorf("Dispatch took %v, less than the lost publish's PubAck timeout", el)
	}
	for i, id := range []string{"lost", "norsp", "buffer", "fine"} {
		if res[i].IsError || res[i].Content.Text() != "ok "+id {
			t.Errorf("result %d = %+v", i, res[i])
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, want := range map[string]int{"lost": 2, "norsp": 3, "buffer": 2, "fine": 1} {
		if got := len(s.sent[id]); got != want {
			t.Errorf("%s published %d times, want %d", id, got, want)
		}
		first := s.sent[id][0]
		for _, m := range s.sent[id][1:] {
			if m.Subject != first.Subject || !bytes.Equal(m.Data, first.Data) ||
				m.Header.Get(js.MsgIDHeader) != first.Header.Get(js.MsgIDHeader) || m.Header.Get(envelope.HeaderTraceparent) != first.Header.Get(envelope.HeaderTraceparent) {
				t.Errorf("%s published again differently: %+v, first %+v", id, m, first)
			}
		}
	}
	for _, id := range []string{"norsp", "buffer"} {
		if !s.ackied[id].Before(s.ackied["lost"]) {
			t.Errorf("%s was stored after the lost call's timeout (%v vs %v after start)", id,
				s.ackied[id].Sub(start), s.ackied["lost"].Sub(start))
		}
	}
	if n := logs.count(slog.LevelWarn, logRetrying); n != 1 {
		t.Errorf("%d retry warnings, want 1 per turn", n)
	}
	if n := logs.count(slog.LevelInfo, logStored); n != 1 {
		t.Errorf("%d got-through infos, want 1 per turn", n)
	}
	if n := len(d.inflight); n != 0 {
		t.Errorf("%d publish slots still taken", n)
	}
}

// A final error fails the turn at once, even while other calls of the turn
// are being retried; with retries disabled, so does any error.
func TestPublishFinalErrorFailsAtOnce(t *testing.T) {
	t.Parallel()
	tooLarge := &js.APIError{Code: 400, ErrorCode: js.JSErrCodeStreamMessageExceedsMaximum, Description: "message size exceeds maximum allowed"}
	tests := []struct {
		name    string
		retryOn time.Duration
		script  func(id string, n int) attempt
		want    error
	}{
		{"message too large", 0, func(id string, n int) attempt {
			if id == "big" {
				return attempt{err: tooLarge}
			}
			return attempt{err: js.ErrNoStreamResponse}
		}, js.ErrStreamMessageExceedsMaximum},
		{"connection closed", 0, func(id string, n int) attempt {
			if id == "big" && n == 2 {
				return attempt{sync: nats.ErrConnectionClosed}
			}
			return attempt{err: nats.ErrDisconnected}
		}, nats.ErrConnectionClosed},
		{"retries disabled", -1, func(string, int) attempt {
			return attempt{err: js.ErrNoStreamResponse}
		}, js.ErrNoStreamResponse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, s, logs := newScripted(t, tc.script, func(c *Config) {
				c.PublishTimeout = 10 * time.Second
				c.PublishRetryFor = tc.retryOn
			})
			start := time.Now()
			res, err := d.Dispatch(timeout(t, 30*time.Second), "", []envelope.ToolUseBlock{use("other", "echo", `{}`), use("big", "echo", `{}`)})
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, tc.want) || res != nil {
				t.Errorf("Dispatch = %v, %v; want ErrUnavailable and %v", res, err, tc.want)
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("Dispatch took %v, want at once", el)
			}
			if tc.retryOn < 0 {
				s.mu.Lock()
				if n := len(s.sent["other"]) + len(s.sent["big"]); n > 2 {
					t.Errorf("%d publishes with retries disabled, want at most 2", n)
				}
				s.mu.Unlock()
				if n := logs.count(slog.LevelWarn, logRetrying); n != 0 {
					t.Errorf("%d retry warnings with retries disabled", n)
				}
			}
			if n := len(d.inflight); n != 0 {
				t.Errorf("%d publish slots still taken", n)
			}
			if pending, _ := d.calls.stats(); pending != 0 {
				t.Errorf("%d calls still pending", pending)
			}
		})
	}
}

// outage makes JetStream unavailable to b's dispatcher and returns the
// function that ends it.
type outage func(t *testing.T, b *testBundle) (recover func())

// serverDown shuts the server down; recovering restarts it on the same
// address with the same store, and points b at the new server (setup shuts
// it down when the test ends).
func serverDown(t *testing.T, b *testBundle) func() {
	u, err := url.Parse(b.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Dir(b.srv.StoreDir())
	b.srv.Shutdown()
	return func() {
		srv, err := embedded.Start(embedded.Options{Listen: u.Host, DataDir: dataDir, Logger: natstest.Logger(t)})
		if err != nil {
			t.Fatalf("restart: %v", err)
		}
		b.srv = srv
	}
}

// streamGone deletes TOOL_CALLS: publishes get no responders, as while a
// cluster elects a new stream leader; recovering provisions it again.
func streamGone(t *testing.T, b *testBundle) func() {
	if err := b.js.DeleteStream(context.Background(), jetstream.StreamCalls); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := jetstream.Provision(timeout(t, 10*time.Second), b.js, jetstream.Config{}); err != nil {
			t.Fatalf("provision: %v", err)
		}
	}
}

// JetStream is unavailable when Dispatch starts publishing and comes back
// about 1.5 s later: the turn succeeds, each call stored and run once.
func TestDispatchRidesOutOutage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		outage outage
	}{
		{"server restart", serverDown},
		{"no stream leader", streamGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logs := &logRecorder{}
			b := setup(t, func(c *Config) {
				c.PublishTimeout = 300 * time.Millisecond // attempts time out during the restart
				c.PublishRetryFor = 20 * time.Second
				c.Logger = slog.New(logs)
			})
			end := tc.outage(t, b)
			calls := []envelope.ToolUseBlock{
				use("toolu_o1", "echo", `{"text":"one"}`), use("toolu_o2", "echo", `{"text":"two"}`), use("toolu_o3", "echo", `{"text":"three"}`),
			}
			type out struct {
				res []envelope.Result
				err error
			}
			done := make(chan out, 1)
			start := time.Now()
			go func() {
				res, err := b.d.Dispatch(timeout(t, 60*time.Second), "s", calls)
				done <- out{res, err}
			}()
			eventually(t, "a publish to fail and be retried", func() bool { return logs.count(slog.LevelWarn, logRetrying) == 1 })
			time.Sleep(time.Until(start.Add(1500 * time.Millisecond)))
			end()

			// Every call is stored once; no worker has taken any yet.
			deadline := time.Now().Add(20 * time.Second)
			for b.metrics.get("dispatched", "echo") < len(calls) {
				if time.Now().After(deadline) {
					t.Fatalf("only %d of %d calls stored 20s after the outage", b.metrics.get("dispatched", "echo"), len(calls))
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("stored after %v", time.Since(start))
			if n := streamMsgs(t, b.js, jetstream.StreamCalls); n != uint64(len(calls)) {
				t.Errorf("TOOL_CALLS holds %d messages, want %d: each call once", n, len(calls))
			}
			w := startWorker(t, b, "echo", echoText)
			var o out
			select {
			case o = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Dispatch did not return after the outage")
			}
			t.Logf("answered after %v", time.Since(start))
			if o.err != nil {
				t.Fatalf("Dispatch: %v", o.err)
			}
			for i, want := range []string{"one", "two", "three"} {
				if o.res[i].IsError || o.res[i].Content.Text() != want {
					t.Errorf("result %d = %+v, want %q", i, o.res[i], want)
				}
			}
			eventually(t, "the worker to ack every call", func() bool { return streamMsgs(t, b.js, jetstream.StreamCalls) == 0 })
			seen, _ := w.seen()
			ids := make([]string, 0, len(seen))
			for _, c := range seen {
				ids = append(ids, c.ID)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, []string{"toolu_o1", "toolu_o2", "toolu_o3"}) {
				t.Errorf("worker ran %v, want each call once", ids)
			}
			if n := logs.count(slog.LevelWarn, logRetrying); n != 1 {
				t.Errorf("%d retry warnings, want 1 per turn", n)
			}
			if n := logs.count(slog.LevelInfo, logStored); n != 1 {
				t.Errorf("%d got-through infos, want 1 per turn", n)
			}
			if n := logs.count(slog.LevelWarn, "publishing a call failed"); n != 0 {
				t.Errorf("%d publish failures logged for a turn that got through", n)
			}
			if n := len(b.d.inflight); n != 0 {
				t.Errorf("%d publish slots still taken", n)
			}
		})
	}
}

// An outage longer than PublishRetryFor fails the turn with ErrUnavailable,
// about PublishRetryFor after it began, with the last attempt's error.
func TestDispatchRetryBudgetSpent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		outage     outage
		pubTimeout time.Duration // long enough for no responders to be reported
		want       error
	}{
		{"server down", serverDown, 300 * time.Millisecond, nil},
		{"no stream leader", streamGone, 2 * time.Second, js.ErrNoStreamResponse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const budget = 3 * time.Second
			b := setup(t, func(c *Config) {
				c.PublishTimeout = tc.pubTimeout
				c.PublishRetryFor = budget
			})
			// Not recovered during the test; recovered when it ends, so
			// that the dispatcher stops against a live server.
			t.Cleanup(tc.outage(t, b))
			start := time.Now()
			res, err := b.d.Dispatch(timeout(t, 60*time.Second), "", []envelope.ToolUseBlock{use("a", "echo", `{}`), use("b", "echo", `{}`)})
			el := time.Since(start)
			if !errors.Is(err, ErrUnavailable) || res != nil {
				t.Fatalf("Dispatch = %v, %v; want ErrUnavailable", res, err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want it to wrap %v", err, tc.want)
			}
			if el < budget/2 || el > budget+5*time.Second {
				t.Errorf("Dispatch gave up after %v, want about %v", el, budget)
			}
			if n := len(b.d.inflight); n != 0 {
				t.Errorf("%d publish slots still taken", n)
			}
			if pending, _ := b.d.calls.stats(); pending != 0 {
				t.Errorf("%d calls still pending", pending)
			}
			if got := b.metrics.pending.Load(); got != 0 {
				t.Errorf("pending gauge = %d, want 0", got)
			}
		})
	}
}

// A message the stream refuses (larger than its max_msg_size) fails at
// once, without a retry.
func TestDispatchRefusedMessageFailsAtOnce(t *testing.T) {
	t.Parallel()
	logs := &logRecorder{}
	b := setup(t, func(c *Config) {
		c.PublishRetryFor = 30 * time.Second
		c.Logger = slog.New(logs)
	})
	ctx := timeout(t, 10*time.Second)
	s, err := b.js.Stream(ctx, jetstream.StreamCalls)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxMsgSize = 1024
	if _, err := b.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	big := `{"text":"` + string(bytes.Repeat([]byte("x"), 2048)) + `"}`
	_, err = b.d.Dispatch(timeout(t, 60*time.Second), "", []envelope.ToolUseBlock{use("toolu_big", "echo", big)})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, js.ErrStreamMessageExceedsMaximum) {
		t.Errorf("err = %v, want ErrUnavailable and message too large", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Dispatch took %v, want at once", el)
	}
	if n := logs.count(slog.LevelWarn, logRetrying); n != 0 {
		t.Errorf("a refused message was retried (%d warnings)", n)
	}
}

// A publish the account is not permitted fails at once: the server only
// reports it on the connection, and the PubAck would time out.
func TestDispatchPermissionViolationFailsAtOnce(t *testing.T) {
	t.Parallel()
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Users: []*server.User{{Username: "orch", Password: "secret-test-password", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{jetstream.CallSubject("secret")}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("orch", "secret-test-password"),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})) // not to stderr
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := jetstream.Provision(timeout(t, 10*time.Second), j, jetstream.Config{}); err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{
		JS: j, Catalog: discovery.StaticCatalog("secret", "echo"), Logger: natstest.Logger(t),
		PublishTimeout: 10 * time.Second, PublishRetryFor: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopped, stop := context.WithCancel(context.Background()); stop(); _ = d.Stop(stopped) })
	start := time.Now()
	_, err = d.Dispatch(timeout(t, 60*time.Second), "", []envelope.ToolUseBlock{use("toolu_p", "secret", `{}`)})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, nats.ErrPermissionViolation) {
		t.Errorf("err = %v, want ErrUnavailable and a permissions violation", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Dispatch took %v, want at once", el)
	}
	// The violation, still the connection's last error, does not fail a
	// later turn to a permitted tool (no worker: it expires, without error).
	res, err := d.Dispatch(timeout(t, 500*time.Millisecond), "", []envelope.ToolUseBlock{use("toolu_e", "echo", `{}`)})
	if err != nil || !res[0].IsError || res[0].Code != "deadline_exceeded" {
		t.Errorf("Dispatch to a permitted tool = %+v, %v; want a deadline result", res, err)
	}
}

// ctx cancellation, Stop and the turn's deadline end a turn that is
// retrying promptly, without waiting for PublishRetryFor.
func TestDispatchEndsWhileRetrying(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		end   func(b *testBundle, cancel context.CancelFunc)
		ctxTO time.Duration // the turn's deadline
		check func(err error) bool
	}{
		{"cancel", func(_ *testBundle, cancel context.CancelFunc) { cancel() }, time.Minute,
			func(err error) bool { return errors.Is(err, context.Canceled) && !errors.Is(err, ErrUnavailable) }},
		{"stop", func(b *testBundle, _ context.CancelFunc) { stopNow(b.d) }, time.Minute,
			func(err error) bool { return errors.Is(err, ErrStopped) && errors.Is(err, ErrUnavailable) }},
		{"deadline", func(*testBundle, context.CancelFunc) {}, 1500 * time.Millisecond,
			func(err error) bool { return errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrStopped) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logs := &logRecorder{}
			b := setup(t, func(c *Config) {
				c.PublishRetryFor = time.Minute
				c.Logger = slog.New(logs)
			})
			streamGone(t, b)
			ctx, cancel := context.WithTimeout(context.Background(), tc.ctxTO)
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := b.d.Dispatch(ctx, "", []envelope.ToolUseBlock{use("a", "echo", `{}`), use("b", "echo", `{}`)})
				errc <- err
			}()
			eventually(t, "a publish to fail and be retried", func() bool { return logs.count(slog.LevelWarn, logRetrying) == 1 })
			ended := time.Now()
			tc.end(b, cancel)
			select {
			case err := <-errc:
				if !tc.check(err) {
					t.Errorf("err = %v", err)
				}
				if el := time.Since(ended); el > 3*time.Second {
					t.Errorf("Dispatch returned %v after the end", el)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Dispatch still retrying")
			}
			if n := len(b.d.inflight); n != 0 {
				t.Errorf("%d publish slots still taken", n)
			}
			if pending, _ := b.d.calls.stats(); pending != 0 {
				t.Errorf("%d calls still pending", pending)
			}
		})
	}
}
