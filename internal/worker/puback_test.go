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

// publishSync answers as JetStream's PublishMsg does: stored, refused by
// the stream with an API error, no stream.
func TestPublishSyncAnswersAsPublishMsg(t *testing.T) {
	t.Parallel()
	_, nc, j := natstest.StartProvisioned(t)
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
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, want := j.PublishMsg(ctx, tc.msg(1))
			got := publishSync(ctx, nc, tc.msg(2))
			if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
				t.Fatalf("publishSync: %v; PublishMsg: %v", got, want)
			}
			if jetstream.Transient(got) != jetstream.Transient(want) {
				t.Errorf("transient: publishSync's error %v, PublishMsg's %v", jetstream.Transient(got), jetstream.Transient(want))
			}
			var gotAPI, wantAPI js.JetStreamError
			if errors.As(got, &gotAPI) != errors.As(want, &wantAPI) {
				t.Errorf("publishSync's error %v is a JetStreamError: %v; PublishMsg's %v: %v", got, gotAPI != nil, want, wantAPI != nil)
			}
		})
	}
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
