package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
)

func TestTransient(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"pub ack timeout", context.DeadlineExceeded, true},
		{"nats timeout", nats.ErrTimeout, true},
		{"no responders", nats.ErrNoResponders, true},
		{"no stream response", js.ErrNoStreamResponse, true},
		{"wrapped no stream response", fmt.Errorf("publish: %w", js.ErrNoStreamResponse), true},
		{"disconnected", nats.ErrDisconnected, true},
		{"cluster unavailable", &js.APIError{Code: 503, ErrorCode: 10008}, true},
		{"stream offline", &js.APIError{Code: 500, ErrorCode: 10118}, true},
		{"cancelled", context.Canceled, false},
		{"max payload", nats.ErrMaxPayload, false},
		{"permission", fmt.Errorf("x: %w", nats.ErrPermissionViolation), false},
		{"closed", nats.ErrConnectionClosed, false},
		{"message too large", &js.APIError{Code: 400, ErrorCode: 10054}, false},
		{"other", errors.New("boom"), true},
	}
	for _, c := range cases {
		if got := jetstream.Transient(c.err); got != c.want {
			t.Errorf("%s: Transient(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// The publish errors nats.go and the server give, each way.
func TestTransientPublishErrors(t *testing.T) {
	t.Parallel()
	apiErr := func(code int, errCode js.ErrorCode) error {
		return &js.APIError{Code: code, ErrorCode: errCode, Description: "test"}
	}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"no response from stream", js.ErrNoStreamResponse, true},
		{"no responders", nats.ErrNoResponders, true},
		{"disconnected", nats.ErrDisconnected, true},
		{"reconnect buffer full", nats.ErrReconnectBufExceeded, true},
		{"too many stalled", js.ErrTooManyStalledMsgs, true},
		{"async publish timeout", js.ErrAsyncPublishTimeout, true},
		{"our PubAck timeout", errors.New("no acknowledgement within 5s"), true},
		{"409 msg id in process", apiErr(409, 10158), true},
		{"429 too many requests", apiErr(429, 10167), true},
		{"500 not leader", apiErr(500, 10009), true},
		{"503 cluster unavailable", apiErr(503, 10008), true},
		{"503 insufficient resources", apiErr(503, 10023), true},
		{"503 store failed", apiErr(503, 10077), true},
		{"503 JetStream not enabled", js.ErrJetStreamNotEnabled, true},
		{"400 message too large", apiErr(400, js.JSErrCodeStreamMessageExceedsMaximum), false},
		{"400 message too large, client sentinel", js.ErrStreamMessageExceedsMaximum, false},
		{"400 message too large, wrapped", fmt.Errorf("publish: %w", apiErr(400, 10054)), false},
		{"400 headers too large", apiErr(400, 10097), false},
		{"500 replicas > 1 on a single server", apiErr(500, 10074), false},
		{"404 stream not found", apiErr(404, js.JSErrCodeStreamNotFound), false},
		{"500 consumer offline", apiErr(500, 10119), true},
		{"400 sealed stream", apiErr(400, 10109), false},
		{"max payload", nats.ErrMaxPayload, false},
		{"bad subject", nats.ErrBadSubject, false},
		{"headers not supported", nats.ErrHeadersNotSupported, false},
		{"connection closed", nats.ErrConnectionClosed, false},
		{"connection draining", nats.ErrConnectionDraining, false},
		{"permissions violation", fmt.Errorf("%w: Permissions Violation for Publish to %q", nats.ErrPermissionViolation, "tools.call.x"), false},
		{"invalid PubAck", js.ErrInvalidJSAck, false},
		{"reply subject set", js.ErrAsyncPublishReplySubjectSet, false},
	}
	for _, tc := range tests {
		if got := jetstream.Transient(tc.err); got != tc.want {
			t.Errorf("%s: jetstream.Transient(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// Jittered around a doubling delay, and capped.
func TestRepublishDelay(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 12; n++ {
		center := min(jetstream.RepublishBaseDelay<<(n-1), jetstream.RepublishMaxDelay)
		lo, hi := time.Duration(1<<62), time.Duration(0)
		for range 500 {
			d := jetstream.RepublishDelay(n)
			if d < center/2 || d >= center*3/2 {
				t.Fatalf("jetstream.RepublishDelay(%d) = %v, want in [%v, %v)", n, d, center/2, center*3/2)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		if hi-lo < center/2 {
			t.Errorf("jetstream.RepublishDelay(%d) spans only %v..%v: not jittered", n, lo, hi)
		}
	}
	if d := jetstream.RepublishDelay(1000); d < jetstream.RepublishMaxDelay/2 || d >= jetstream.RepublishMaxDelay*3/2 {
		t.Errorf("jetstream.RepublishDelay(1000) = %v, want capped around %v", d, jetstream.RepublishMaxDelay)
	}
}
