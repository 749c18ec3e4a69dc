package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

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
		{"stream not found", &js.APIError{Code: 404, ErrorCode: js.JSErrCodeStreamNotFound}, false},
		{"message too large", &js.APIError{Code: 400, ErrorCode: 10054}, false},
		{"other", errors.New("boom"), true},
	}
	for _, c := range cases {
		if got := jetstream.Transient(c.err); got != c.want {
			t.Errorf("%s: Transient(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
