package settle

import (
	"context"
	"errors"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
)

// Message is the settle verbs of one call message in TOOL_CALLS, as Settle
// uses them: a worker's delivery (a jetstream.Msg and the worker's
// publishes), or a call the poison watcher found by its stream sequence.
type Message interface {
	// PublishDeadLetter publishes e to TOOL_DLQ with Nats-Msg-Id id and
	// waits for its PubAck.
	PublishDeadLetter(ctx context.Context, e *Entry, id string) error
	// PublishResult publishes the call's encoded result to its caller and
	// waits for its PubAck. A call with no caller to answer publishes
	// nothing.
	PublishResult(ctx context.Context, result []byte) error
	// Ack is done with the message: it leaves TOOL_CALLS.
	Ack(ctx context.Context) error
	// Nak hands the message back, to be delivered again after delay (0:
	// at once).
	Nak(ctx context.Context, delay time.Duration) error
	// Term ends the message for good, saying why: it is never delivered
	// again.
	Term(ctx context.Context, reason string) error
}

// Settlement is a call's verdict (classify.Policy.Decide) and what carrying
// it out writes.
type Settlement struct {
	Verdict classify.Verdict
	// Letter is the dead letter, for a verdict that dead-letters, and
	// LetterID its Nats-Msg-Id (the call key, or a stand-in for a call that
	// did not decode).
	Letter   *Entry
	LetterID string
	// Result is the caller's answer, encoded (envelope.EncodeResult), for a
	// verdict that answers; nil publishes nothing.
	Result []byte
}

// PublishError is the error of a Settle whose dead letter or result could
// not be published. The message was not settled: the caller decides what
// happens to it (a worker hands it back, classify.CaseStoreFailed; the
// poison watcher leaves it to its next sweep).
type PublishError struct {
	What string // "dead letter" or "result"
	Err  error
}

// Error says what could not be published and why.
func (e *PublishError) Error() string { return "publish " + e.What + ": " + e.Err.Error() }

// Unwrap returns the publish's error.
func (e *PublishError) Unwrap() error { return e.Err }

// errNoLetter is Settle's error for a dead-letter verdict without its dead
// letter.
var errNoLetter = errors.New("dlq: settle: the verdict dead-letters the call, and the settlement has no dead letter")

// Settle is the one settle step of a call message, for the worker and the
// poison watcher alike. It carries out s.Verdict in the order that loses no
// call: the dead letter first (when the verdict dead-letters), then the
// caller's result (when it answers), then the message's verb: Nak with the
// verdict's delay when it requeues, Term when it terminates (a malformed
// call), Ack otherwise. A failed publish returns a *PublishError and leaves
// the message unsettled; a failed verb returns the verb's error.
func Settle(ctx context.Context, m Message, s Settlement) error {
	v := s.Verdict
	if v.DeadLetters() {
		if s.Letter == nil {
			return errNoLetter
		}
		if err := m.PublishDeadLetter(ctx, s.Letter, s.LetterID); err != nil {
			return &PublishError{What: "dead letter", Err: err}
		}
	}
	if v.Answers() && s.Result != nil {
		if err := m.PublishResult(ctx, s.Result); err != nil {
			return &PublishError{What: "result", Err: err}
		}
	}
	switch {
	case v.Requeues():
		return m.Nak(ctx, v.Delay)
	case v.Terminates():
		return m.Term(ctx, "malformed call: "+s.Letter.Error)
	default:
		return m.Ack(ctx)
	}
}
