package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
)

func TestReadAck(t *testing.T) {
	a := &pubAcks{}
	for _, tc := range []struct {
		in   string
		ok   bool
		want js.PubAck
	}{
		{`{"stream":"TOOL_CALLS","seq":42}`, true, js.PubAck{Stream: "TOOL_CALLS", Sequence: 42}},
		{`{"stream":"TOOL_CALLS","seq":7,"duplicate":true}`, true, js.PubAck{Stream: "TOOL_CALLS", Sequence: 7, Duplicate: true}},
		{`{"stream":"S","seq":18446744073709551615}`, true, js.PubAck{Stream: "S", Sequence: 18446744073709551615}},
		{`{"stream":"S","seq":18446744073709551616}`, false, js.PubAck{}},
		{`{"stream":"S","seq":1,"domain":"hub"}`, false, js.PubAck{}},
		{`{"stream":"S","seq":1,"duplicate":false}`, false, js.PubAck{}},
		{`{"stream":"S\"x","seq":1}`, false, js.PubAck{}},
		{`{"stream":"","seq":1}`, false, js.PubAck{}},
		{`{"stream":"S","seq":}`, false, js.PubAck{}},
		{`{"stream":"S","seq":1} `, false, js.PubAck{}},
		{`{"error":{"code":503,"err_code":10077,"description":"x"}}`, false, js.PubAck{}},
		{``, false, js.PubAck{}},
	} {
		var got js.PubAck
		if ok := a.readAck([]byte(tc.in), &got); ok != tc.ok || got != tc.want {
			t.Errorf("readAck(%s) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	// The stream's name is kept for the next PubAcks.
	var x, y js.PubAck
	a.readAck([]byte(`{"stream":"T","seq":1}`), &x)
	if !testing.Short() && testing.AllocsPerRun(100, func() { a.readAck([]byte(`{"stream":"T","seq":2}`), &y) }) != 0 {
		t.Error("readAck allocates for a stream name it saw before")
	}
}

// TestPubAcks publishes through pubAcks to a real server: stored, a
// duplicate, an API error, no stream (after the retries), a timeout of
// the sweep, a reconnect.
func TestPubAcks(t *testing.T) {
	_, nc, j := natstest.StartProvisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := j.CreateStream(ctx, js.StreamConfig{Name: "PA", Subjects: []string{"pa.>"}, Storage: js.MemoryStorage, MaxMsgsPerSubject: 1, Discard: js.DiscardNew, DiscardNewPerSubject: true}); err != nil {
		t.Fatal(err)
	}
	a, err := newPubAcks(nc)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	wait := func(f js.PubAckFuture) (*js.PubAck, error) {
		t.Helper()
		select {
		case ack := <-f.Ok():
			return ack, nil
		case err := <-f.Err():
			return nil, err
		case <-ctx.Done():
			t.Fatal("no PubAck")
			return nil, nil
		}
	}
	pub := func(subject, id string) js.PubAckFuture {
		t.Helper()
		m := &nats.Msg{Subject: subject, Data: []byte("x"), Header: nats.Header{}}
		if id != "" {
			m.Header.Set(js.MsgIDHeader, id)
		}
		f, err := a.publish(m)
		if err != nil {
			t.Fatal(err)
		}
		if f.Msg() != m || m.Reply != "" {
			t.Fatal("the future's message is not the one given, or it was changed")
		}
		return f
	}

	ack, err := wait(pub("pa.a", "k1"))
	if err != nil || ack.Stream != "PA" || ack.Sequence != 1 || ack.Duplicate {
		t.Fatalf("first publish: %+v, %v", ack, err)
	}
	ack, err = wait(pub("pa.a", "k1"))
	if err != nil || ack.Sequence != 1 || !ack.Duplicate {
		t.Fatalf("duplicate: %+v, %v", ack, err)
	}
	// Err after the PubAck came: nothing; Ok again: the same PubAck.
	f := pub("pa.b", "k2")
	if ack, err = wait(f); err != nil || ack.Sequence != 2 {
		t.Fatalf("second message: %+v, %v", ack, err)
	}
	// An API error: the subject's one message is there, DiscardNew per subject.
	_, err = wait(pub("pa.b", "k3"))
	var apiErr *js.APIError
	if !errors.As(err, &apiErr) || apiErr.Code == 0 {
		t.Fatalf("full subject: %v, want a *jetstream.APIError", err)
	}
	// No stream: js.ErrNoStreamResponse after the retries.
	start := time.Now()
	if _, err = wait(pub("nostream.x", "")); !errors.Is(err, js.ErrNoStreamResponse) {
		t.Fatalf("no stream: %v", err)
	}
	if el := time.Since(start); el < noResponderRetries*noResponderWait {
		t.Fatalf("no stream answered after %v: the retries were not made", el)
	}
	// The sweep fails a publish pending for PublishAsyncTimeout.
	f = pub("pa.c", "k4")
	if _, err := wait(f); err != nil {
		t.Fatal(err)
	}
	lost := &ackFuture{a: a, id: "lost", sent: time.Now().Add(-PublishAsyncTimeout)}
	kept := &ackFuture{a: a, id: "kept", sent: time.Now()}
	a.mu.Lock()
	a.pending[lost.id], a.pending[kept.id] = lost, kept
	a.mu.Unlock()
	a.expire(time.Now())
	if _, err := wait(lost); !errors.Is(err, js.ErrAsyncPublishTimeout) {
		t.Fatalf("lost PubAck: %v", err)
	}
	// A reconnect fails what is pending.
	a.failAll(nats.ErrDisconnected)
	if _, err := wait(kept); !errors.Is(err, nats.ErrDisconnected) {
		t.Fatalf("pending at a reconnect: %v", err)
	}
	a.mu.Lock()
	n := len(a.pending)
	a.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d publishes left pending", n)
	}
}

// BenchmarkPublishAsync compares a publish and its PubAck through nats.go's
// PublishMsgAsync (with the host's WithPublishAsyncTimeout) and through
// pubAcks, to an embedded server, from many goroutines at once as turns
// publish. The allocations include the server's, the same in both.
func BenchmarkPublishAsync(b *testing.B) {
	_, nc, _ := natstest.StartProvisioned(b)
	j, err := js.New(nc, js.WithPublishAsyncTimeout(PublishAsyncTimeout))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := j.CreateStream(ctx, js.StreamConfig{Name: "PB", Subjects: []string{"pb.>"}, Storage: js.MemoryStorage, MaxMsgs: 10000}); err != nil {
		b.Fatal(err)
	}
	a, err := newPubAcks(nc)
	if err != nil {
		b.Fatal(err)
	}
	defer a.close()
	data := make([]byte, 579)
	for _, bc := range []struct {
		name string
		pub  func(*nats.Msg) (js.PubAckFuture, error)
	}{
		{"nats.go", func(m *nats.Msg) (js.PubAckFuture, error) { return j.PublishMsgAsync(m) }},
		{"pubAcks", a.publish},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				m := &nats.Msg{Subject: "pb.echo", Data: data, Header: nats.Header{"A": []string{"b"}}}
				for pb.Next() {
					f, err := bc.pub(m)
					if err != nil {
						b.Error(err)
						return
					}
					<-f.Ok() // the stream takes every message
				}
			})
		})
	}
}
