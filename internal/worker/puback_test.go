package worker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
)

func TestPubAckStored(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		data string
		want bool
	}{
		{`{"stream":"TOOL_RESULTS", "seq":42}`, true}, // nats-server's own form
		{`{"stream":"TOOL_RESULTS","seq":42}`, true},
		{`{"stream":"TOOL_RESULTS","seq":42,"duplicate":true}`, true},
		{`{"stream":"S","domain":"hub","seq":1}` + "\r\n", true},
		{`{"stream":"S","seq":1,"batch":"a \"error\" b","count":2}`, true}, // escaped: not a member
		{` { "stream" : "S" , "seq" : 1 } `, false},                        // another form: decoded
		{`{"seq":1,"stream":"S"}`, false},
		{`{"stream":"","seq":1}`, false},
		{`{"seq":1}`, false},
		{`{"stream":"S","error":{"code":503,"err_code":10077,"description":"x"}}`, false},
		{`{"error":{"code":400,"err_code":10060,"description":"expected stream does not match"},"stream":"S"}`, false},
		{`{"stream":5}`, false},
		{`{"stream":"S"`, false},
		{``, false},
		{`null`, false},
	} {
		if got := pubAckStored([]byte(tc.data)); got != tc.want {
			t.Errorf("pubAckStored(%s) = %v, want %v", tc.data, got, tc.want)
		}
	}
}

// publishSync and resultAcks answer as JetStream's PublishMsg does:
// stored, refused by the stream with an API error, no stream.
func TestPublishSyncAnswersAsPublishMsg(t *testing.T) {
	t.Parallel()
	_, nc, j := natstest.StartProvisioned(t)
	acks := startResultAcks(t, nc)
	n := 0
	for _, tc := range []struct {
		name string
		msg  func(n int) *nats.Msg
	}{
		{"stored", func(n int) *nats.Msg {
			return &nats.Msg{Subject: jetstream.ResultSubject("orch", fmt.Sprint("k", n)), Data: []byte("r")}
		}},
		{"refused", func(n int) *nats.Msg {
			return &nats.Msg{Subject: jetstream.ResultSubject("orch", fmt.Sprint("k", n)), Data: []byte("r"),
				Header: nats.Header{"Nats-Expected-Stream": []string{"ANOTHER"}}}
		}},
		{"no stream", func(int) *nats.Msg { return &nats.Msg{Subject: "nothing.stores.this", Data: []byte("r")} }},
	} {
		for _, p := range []struct {
			name    string
			publish func(context.Context, *nats.Msg) error
		}{
			{"publishSync", func(ctx context.Context, m *nats.Msg) error { return publishSync(ctx, nc, m) }},
			{"resultAcks", acks.publish},
		} {
			t.Run(tc.name+"/"+p.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				n += 2
				_, want := j.PublishMsg(ctx, tc.msg(n))
				got := p.publish(ctx, tc.msg(n+1))
				if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
					t.Fatalf("%s: %v; PublishMsg: %v", p.name, got, want)
				}
				if jetstream.Transient(got) != jetstream.Transient(want) {
					t.Errorf("transient: %s's error %v, PublishMsg's %v", p.name, jetstream.Transient(got), jetstream.Transient(want))
				}
				var gotAPI, wantAPI js.JetStreamError
				if errors.As(got, &gotAPI) != errors.As(want, &wantAPI) {
					t.Errorf("%s's error %v is a JetStreamError: %v; PublishMsg's %v: %v", p.name, got, gotAPI != nil, want, wantAPI != nil)
				}
			})
		}
	}
	assertNonePending(t, acks)
}

// startResultAcks returns nc's resultAcks, running until the test ends.
func startResultAcks(t testing.TB, nc *nats.Conn) *resultAcks {
	t.Helper()
	acks, err := newResultAcks(nc)
	if err != nil {
		t.Fatal(err)
	}
	done, ran := make(chan struct{}), make(chan struct{})
	go func() { defer close(ran); acks.run(done) }()
	t.Cleanup(func() { close(done); <-ran })
	return acks
}

// assertNonePending fails t if acks holds a publish still.
func assertNonePending(t *testing.T, acks *resultAcks) {
	t.Helper()
	acks.mu.Lock()
	defer acks.mu.Unlock()
	if len(acks.pending) != 0 {
		t.Errorf("%d publishes still pending", len(acks.pending))
	}
}

// A publish that finds no stream is retried as nats.go retries it: when
// the stream comes within the retries, the result is stored.
func TestResultAcksRetryNoResponders(t *testing.T) {
	t.Parallel()
	_, nc, j := natstest.StartProvisioned(t)
	acks := startResultAcks(t, nc)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// Both publish before the stream exists and get "no responders"; the
	// stream is made before their first retry (publishRetryWait).
	errs := make(chan error, 2)
	go func() {
		_, err := j.PublishMsg(ctx, &nats.Msg{Subject: "late.PublishMsg", Data: []byte("r")})
		errs <- err
	}()
	go func() { errs <- acks.publish(ctx, &nats.Msg{Subject: "late.resultAcks", Data: []byte("r")}) }()
	// Both publishes have had their "no responders" (the server answers
	// at once), while they wait for their retry.
	natstest.Eventually(t, 5*time.Second, "resultAcks to wait for its retry", func() bool {
		acks.mu.Lock()
		defer acks.mu.Unlock()
		return acks.next.Load() == 1 && len(acks.pending) == 0
	})
	if _, err := j.CreateStream(ctx, js.StreamConfig{Name: "LATE", Subjects: []string{"late.>"}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("publish after the stream came: %v", err)
		}
	}
	if next := acks.next.Load(); next < 2 {
		t.Errorf("resultAcks made %d requests, want a retry", next)
	}
	s, err := j.Stream(ctx, "LATE")
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{"late.PublishMsg", "late.resultAcks"} {
		if _, err := s.GetLastMsgForSubject(ctx, subject); err != nil {
			t.Errorf("%s not stored: %v", subject, err)
		}
	}
	assertNonePending(t, acks)
}

// A publish that no reply answers ends with its context, as nats.go's
// request does, also through a reconnect (the server gone); one pending
// when the connection closes ends as nats.go's request does then.
func TestResultAcksEndAsRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, srv interface{ Shutdown() }, nc *nats.Conn, ctx *expiringCtx)
		want error
	}{
		{"timeout", func(_ *testing.T, _ interface{ Shutdown() }, _ *nats.Conn, ctx *expiringCtx) { ctx.expire() }, context.DeadlineExceeded},
		{"reconnecting", func(t *testing.T, srv interface{ Shutdown() }, nc *nats.Conn, ctx *expiringCtx) {
			srv.Shutdown()
			natstest.Eventually(t, 10*time.Second, "the connection to reconnect", nc.IsReconnecting)
			ctx.expire() // neither ended for the reconnect (else: nats.ErrDisconnected)
		}, context.DeadlineExceeded},
		{"closed", func(_ *testing.T, _ interface{ Shutdown() }, nc *nats.Conn, _ *expiringCtx) { nc.Close() }, nats.ErrConnectionClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := natstest.Start(t)
			nc := natstest.Connect(t, srv.ClientURL())
			acks := startResultAcks(t, nc)
			// A subject something listens on and never answers.
			silent := natstest.Connect(t, srv.ClientURL())
			var heard atomic.Int32
			if _, err := silent.Subscribe("silent.>", func(*nats.Msg) { heard.Add(1) }); err != nil {
				t.Fatal(err)
			}
			if err := silent.Flush(); err != nil {
				t.Fatal(err)
			}
			ctx := &expiringCtx{Context: t.Context(), done: make(chan struct{})}
			errs := make(chan error, 2)
			go func() {
				_, err := nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: "silent.request", Data: []byte("r")})
				errs <- err
			}()
			go func() { errs <- acks.publish(ctx, &nats.Msg{Subject: "silent.resultAcks", Data: []byte("r")}) }()
			// Both wait: the silent subscriber has both messages, so the
			// publish and the request wait for their replies.
			natstest.Eventually(t, 10*time.Second, "both messages to be sent", func() bool { return heard.Load() == 2 })
			acks.mu.Lock()
			pending := len(acks.pending)
			acks.mu.Unlock()
			if pending != 1 {
				t.Fatalf("%d publishes pending, want 1", pending)
			}
			tc.end(t, srv, nc, ctx)
			for range 2 {
				if err := <-errs; !errors.Is(err, tc.want) {
					t.Errorf("error %v, want %v", err, tc.want)
				}
			}
			assertNonePending(t, acks)
		})
	}
}

// expiringCtx is a context whose deadline passes when expire is called:
// a wait that ends with it ends only once the test had it end.
type expiringCtx struct {
	context.Context
	done chan struct{}
}

func (c *expiringCtx) expire()               { close(c.done) }
func (c *expiringCtx) Done() <-chan struct{} { return c.done }
func (c *expiringCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// Once closed (the worker is idle after Stop), resultAcks publishes as a
// request, and its results are still stored.
func TestResultAcksClosedPublishAsRequests(t *testing.T) {
	t.Parallel()
	_, nc, j := natstest.StartProvisioned(t)
	acks, err := newResultAcks(nc)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	close(done)
	acks.run(done)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	subject := jetstream.ResultSubject("orch", "after-close")
	if err := acks.publish(ctx, &nats.Msg{Subject: subject, Data: []byte("r")}); err != nil {
		t.Fatal(err)
	}
	s, err := j.Stream(ctx, jetstream.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetLastMsgForSubject(ctx, subject); err != nil {
		t.Errorf("result not stored: %v", err)
	}
	assertNonePending(t, acks)
}

// BenchmarkPublishResult publishes a 429-byte result (the bench's size) to
// TOOL_RESULTS on an embedded server and waits for its PubAck, through
// JetStream's PublishMsg and through publishSync, from 64 publishers per
// CPU (a worker's slots publish at once). Allocations include the
// server's.
//
//	go test -run '^$' -bench PublishResult -benchmem ./internal/worker/
func BenchmarkPublishResult(b *testing.B) {
	_, nc, j := natstest.StartProvisioned(b)
	data := make([]byte, 429)
	for _, bc := range []struct {
		name    string
		publish func(context.Context, *nats.Msg) error
	}{
		{"PublishMsg", func(ctx context.Context, m *nats.Msg) error { _, err := j.PublishMsg(ctx, m); return err }},
		{"publishSync", func(ctx context.Context, m *nats.Msg) error { return publishSync(ctx, nc, m) }},
		{"resultAcks", startResultAcks(b, nc).publish},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var n atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(64)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					subject := jetstream.ResultSubject("bench", bc.name+strconv.FormatInt(n.Add(1), 10))
					m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{nats.MsgIdHdr: []string{subject}}}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err := bc.publish(ctx, m)
					cancel()
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
