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
	// ClassNone is the class of a successful result.
	ClassNone Class = ""
	// ClassValidation: the call's input (or tool name) was wrong; the same
	// call will fail again, a corrected one may not.
	ClassValidation Class = "validation"
	// ClassTransient: a failure that may pass (a timeout, a refused
	// connection, HTTP 429 or 5xx); the call may work later.
	ClassTransient Class = "transient"
	// ClassPermanent: a failure that will not pass by retrying (HTTP 404, a
	// missing file, a permission refused).
	ClassPermanent Class = "permanent"
	// ClassInternal: a bug or an unknown failure, of the tool or the pool.
	ClassInternal Class = "internal"
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
	V     int             `json:"v"`     // Version; the encoders set it
	ID    string          `json:"id"`    // the model's tool_use id
	Tool  string          `json:"tool"`  // the tool's name (ValidToolName)
	Input json.RawMessage `json:"input"` // the arguments, a JSON object
	// Key is CallKey(Tenant, Session, ID, Tool, Input). DecodeCall derives
	// it for an envelope written without one and refuses one that differs.
	Key         string    `json:"key,omitempty"`
	Tenant      string    `json:"tenant,omitempty"`      // the API key's tenant; "" for none
	Session     string    `json:"session,omitempty"`     // the agent's conversation, as its host names it
	ReplyTo     string    `json:"reply_to,omitempty"`    // orchestrator instance waiting for the result
	CreatedAt   time.Time `json:"created_at"`            // when the orchestrator made the call
	Deadline    time.Time `json:"deadline"`              // when the call as a whole gives up, retries included
	Traceparent string    `json:"traceparent,omitempty"` // the W3C trace context (HeaderTraceparent)
	// OriginalID is set on a call replayed from the dead-letter stream: the ID of
	// the call it replays.
	OriginalID string `json:"original_id,omitempty"`
}

// Result is the outcome of a call, travelling from a worker (or the
// orchestrator itself) back on tools.result.<instance>.<key>.
type Result struct {
	V      int    `json:"v"`       // Version; the encoders set it
	CallID string `json:"call_id"` // the ID of the call answered (its tool_use id)
	// Key is the key of the call answered (see CallKey); empty in results
	// the orchestrator writes itself for calls it never published.
	Key     string  `json:"key,omitempty"`
	Tool    string  `json:"tool,omitempty"`     // the tool's name
	Content Content `json:"content"`            // what the model reads: the output, or what went wrong
	IsError bool    `json:"is_error,omitempty"` // the call failed

	// Machine-readable fields; empty on success.
	Class      Class         `json:"class,omitempty"`          // what kind of failure
	Code       string        `json:"code,omitempty"`           // what went wrong, e.g. "timeout", "http_429" (package classify)
	Retryable  bool          `json:"retryable,omitempty"`      // the same call may work later
	RetryAfter time.Duration `json:"retry_after_ns,omitempty"` // how long to wait first, when known

	Attempts  int           `json:"attempts,omitempty"`      // how many attempts ran, the answering one included
	WorkerID  string        `json:"worker_id,omitempty"`     // the worker of the answering attempt
	QueueWait time.Duration `json:"queue_wait_ns,omitempty"` // from the call's publication to the answering attempt's start
	ExecTime  time.Duration `json:"exec_time_ns,omitempty"`  // how long the answering attempt ran
}
