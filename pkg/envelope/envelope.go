package envelope

import (
	"encoding/json"
	"time"
)

// Version is the envelope format version this package writes and accepts.
const Version = 1

// HeaderTraceparent is the name of the header that carries a call's W3C
// trace context (its Traceparent): on its message in TOOL_CALLS, for tools
// that read only headers; on the HTTP API's requests and answers; on the
// requests the webhook and http_fetch tools send. It is the W3C name,
// lowercase: NATS headers match names exactly, and net/http writes it as
// "Traceparent".
const HeaderTraceparent = "traceparent"

// Default size limits.
const (
	// MaxInputBytesDefault is the default cap on a call's input JSON.
	MaxInputBytesDefault = 1 << 20
	// MaxContentBytesDefault is the default cap on a result's text content.
	MaxContentBytesDefault = 256 << 10
)

// Class is the error class of a result, as machines read it.
type Class string

// The error classes. A successful result has the empty class.
const (
	ClassNone       Class = ""
	ClassValidation Class = "validation"
	ClassTransient  Class = "transient"
	ClassPermanent  Class = "permanent"
	ClassInternal   Class = "internal"
)

// Valid reports whether c is one of the classes above. Decoding keeps a class
// it does not know (a later writer may add one); a reader should treat such a
// class as ClassInternal.
func (c Class) Valid() bool {
	switch c {
	case ClassNone, ClassValidation, ClassTransient, ClassPermanent, ClassInternal:
		return true
	}
	return false
}

// Call is one tool call travelling from the orchestrator to a worker on
// tools.call.<tool>. Its ID is the model's tool_use_id; its Key (CallKey of
// tenant, session, id, tool and input) is its identity and the message's
// Nats-Msg-Id.
type Call struct {
	V     int             `json:"v"`
	ID    string          `json:"id"`
	Tool  string          `json:"tool"`
	Input json.RawMessage `json:"input"`
	// Key is CallKey(Tenant, Session, ID, Tool, Input). DecodeCall derives
	// it for an envelope written without one and refuses one that differs.
	Key         string    `json:"key,omitempty"`
	Tenant      string    `json:"tenant,omitempty"`
	Session     string    `json:"session,omitempty"`
	ReplyTo     string    `json:"reply_to,omitempty"` // orchestrator instance waiting for the result
	CreatedAt   time.Time `json:"created_at"`
	Deadline    time.Time `json:"deadline"`
	Traceparent string    `json:"traceparent,omitempty"`
	// OriginalID is set on a call replayed from the dead-letter stream: the ID of
	// the call it replays.
	OriginalID string `json:"original_id,omitempty"`
}

// Result is the outcome of a call, travelling from a worker (or the
// orchestrator itself) back on tools.result.<instance>.<key>.
type Result struct {
	V      int    `json:"v"`
	CallID string `json:"call_id"`
	// Key is the key of the call answered (see CallKey); empty in results
	// the orchestrator writes itself for calls it never published.
	Key     string  `json:"key,omitempty"`
	Tool    string  `json:"tool,omitempty"`
	Content Content `json:"content"`
	IsError bool    `json:"is_error,omitempty"`

	// Machine-readable fields; empty on success.
	Class      Class         `json:"class,omitempty"`
	Code       string        `json:"code,omitempty"`
	Retryable  bool          `json:"retryable,omitempty"`
	RetryAfter time.Duration `json:"retry_after_ns,omitempty"`

	Attempts  int           `json:"attempts,omitempty"`
	WorkerID  string        `json:"worker_id,omitempty"`
	QueueWait time.Duration `json:"queue_wait_ns,omitempty"`
	ExecTime  time.Duration `json:"exec_time_ns,omitempty"`
}
