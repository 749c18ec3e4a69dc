package jetstream

import (
	"context"
	"errors"
	"net/http"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// Transient reports whether a failed JetStream publish or API request may
// succeed when sent again unchanged. Publishing again is safe for
// toolpool's messages because every one carries a Nats-Msg-Id.
//
// Transient: no responders or no stream response (a stream leader being
// elected, JetStream restarting), a PubAck that did not come in time,
// a connection that is disconnected or whose reconnect buffer is full, and
// every JetStream API error other than 400: those describe the stream's
// state, not the message (409 the same Msg-Id still in process, typical of
// a publish repeated during a leader change; 429; 500 not leader; 503
// cluster unavailable, store failed or a full stream that workers drain).
//
// Not transient: API errors with status 400 (the stream refuses this very
// message: over its maximum size, headers too large, sealed stream), what
// the client refuses before sending (over max payload, bad subject, headers
// not supported), a closed, draining or invalid connection, a permissions
// violation, an answer that is not a PubAck, and a cancelled context.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var jsErr js.JetStreamError
	if errors.As(err, &jsErr) {
		if apiErr := jsErr.APIError(); apiErr != nil {
			return apiErr.Code != http.StatusBadRequest
		}
	}
	for _, final := range finalErrors {
		if errors.Is(err, final) {
			return false
		}
	}
	return true
}

// finalErrors are the client-side errors Transient treats as final.
var finalErrors = []error{
	context.Canceled,
	nats.ErrMaxPayload, nats.ErrBadSubject, nats.ErrHeadersNotSupported, nats.ErrInvalidMsg,
	nats.ErrConnectionClosed, nats.ErrConnectionDraining, nats.ErrInvalidConnection,
	nats.ErrPermissionViolation,
	js.ErrAsyncPublishReplySubjectSet, js.ErrInvalidJSAck,
}
