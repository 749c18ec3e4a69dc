package jetstream

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// Transient reports whether a failed JetStream publish or API request may
// succeed when sent again unchanged: no PubAck in time, no responders or no
// stream response (a stream leader being elected), a connection that is
// reconnecting, or an API error the server marks temporary (503, or a stream
// or cluster that is offline). Publishing again is safe for toolpool's
// messages because every one carries a Nats-Msg-Id.
//
// Errors that cannot improve by themselves are not transient: a message over
// the server's max payload, a permissions violation, a closed connection, a
// cancelled context, and every other API error (stream not found, message too
// large for the stream, wrong last sequence, …).
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	switch {
	case errors.Is(err, nats.ErrMaxPayload),
		errors.Is(err, nats.ErrPermissionViolation),
		errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrBadSubject):
		return false
	}
	var apiErr *js.APIError
	if errors.As(err, &apiErr) {
		switch {
		case apiErr.Code == 503,
			apiErr.ErrorCode == errCodeClusterNotAvailable,
			apiErr.ErrorCode == errCodeStreamOffline,
			apiErr.ErrorCode == errCodeStreamOfflineReason:
			return true
		}
		return false
	}
	return true // timeouts, no responders, no stream response, disconnects
}

// JetStream API error codes (nats-server's ErrorIdentifier values) of
// conditions that pass on their own.
const (
	errCodeClusterNotAvailable js.ErrorCode = 10008
	errCodeStreamOffline       js.ErrorCode = 10118
	errCodeStreamOfflineReason js.ErrorCode = 10194
)
