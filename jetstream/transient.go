package jetstream

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// Transient reports whether a failed JetStream publish or API request may
// succeed when sent again unchanged. Publishing again is safe for
// toolpool's messages because every one carries a Nats-Msg-Id.
//
// Transient: no responders or no stream response (a stream leader being
// elected, JetStream restarting), a PubAck that did not come in time, a
// connection that is disconnected or whose reconnect buffer is full, and
// the JetStream API errors that describe the stream's state rather than the
// message: 409 (the same Msg-Id still in process, typical of a publish
// repeated during a leader change), 429, 500 not leader or stream/consumer
// offline, and 503 (cluster unavailable, store failed, a full stream that
// workers drain).
//
// Not transient: every other API error, such as 400 (the stream refuses
// this very message: over its maximum size, headers too large, sealed
// stream) or a 500 that is a configuration error (replicas > 1 on a single
// server); what the client refuses before sending (over max payload, bad
// subject, headers not supported); a closed, draining or invalid
// connection; a permissions violation; an answer that is not a PubAck; a
// cancelled context.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var jsErr js.JetStreamError
	if errors.As(err, &jsErr) {
		if apiErr := jsErr.APIError(); apiErr != nil {
			switch apiErr.Code {
			case http.StatusConflict, http.StatusTooManyRequests, http.StatusServiceUnavailable:
				return true
			case http.StatusInternalServerError:
				return transientInternal[apiErr.ErrorCode]
			}
			return false
		}
	}
	for _, final := range finalErrors {
		if errors.Is(err, final) {
			return false
		}
	}
	return true
}

// transientInternal are the JetStream API errors with status 500 that
// describe a passing state (nats-server's ErrorIdentifier values); other 500s
// (replicas > 1 on a single server, …) are configuration errors.
var transientInternal = map[js.ErrorCode]bool{
	10009: true, // cluster can not handle request: not the leader
	10118: true, // stream is offline
	10119: true, // consumer is offline
	10194: true, // stream is offline: reason
}

// finalErrors are the client-side errors Transient treats as final.
var finalErrors = []error{
	context.Canceled,
	nats.ErrMaxPayload, nats.ErrBadSubject, nats.ErrHeadersNotSupported, nats.ErrInvalidMsg,
	nats.ErrConnectionClosed, nats.ErrConnectionDraining, nats.ErrInvalidConnection,
	nats.ErrPermissionViolation,
	js.ErrAsyncPublishReplySubjectSet, js.ErrInvalidJSAck,
}

// Pauses between publishes of a message that failed transiently.
const (
	// RepublishBaseDelay is the pause before the first publish again; it
	// doubles with every further one up to RepublishMaxDelay.
	RepublishBaseDelay = 100 * time.Millisecond
	// RepublishMaxDelay caps the pause.
	RepublishMaxDelay = time.Second
)

// RepublishDelay is the pause before the n-th publish again (n ≥ 1) of a
// message whose publish failed transiently: RepublishBaseDelay doubling to
// RepublishMaxDelay, drawn from [d/2, 3d/2) so that the dispatchers and
// workers of a fleet do not all publish again in step.
func RepublishDelay(n int) time.Duration {
	d := RepublishMaxDelay
	if n >= 1 && n <= 8 {
		d = min(RepublishBaseDelay<<(n-1), RepublishMaxDelay)
	}
	return d/2 + rand.N(d)
}
