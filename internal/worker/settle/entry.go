package settle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Header names carried by dead-letter messages, so that someone with only the
// NATS CLI (nats stream view TOOL_DLQ) sees the essentials.
const (
	HeaderReason   = "Toolpool-Reason"
	HeaderTool     = "Toolpool-Tool"
	HeaderCallID   = "Toolpool-Call-Id"
	HeaderAttempts = "Toolpool-Attempts"
	HeaderError    = "Toolpool-Error"
	HeaderClass    = "Toolpool-Class"
	HeaderCode     = "Toolpool-Code"
	// HeaderFirstFailure and HeaderLastFailure carry the entry's failure
	// times in RFC 3339 with nanoseconds.
	HeaderFirstFailure = "Toolpool-First-Failure"
	HeaderLastFailure  = "Toolpool-Last-Failure"
	// HeaderDeliveries is how often JetStream delivered the call, set when
	// known (poison calls: their attempts rarely got to report).
	HeaderDeliveries = "Toolpool-Deliveries"
)

// Attempt is one failed execution of a call, or one its caller cancelled.
type Attempt struct {
	N        int            `json:"n"`
	WorkerID string         `json:"worker_id,omitempty"`
	Class    envelope.Class `json:"class,omitempty"`
	Code     string         `json:"code,omitempty"`
	Message  string         `json:"message,omitempty"`
	Started  time.Time      `json:"started"`
	Duration time.Duration  `json:"duration_ns"`
	// Cancelled says the call's caller cancelled it during this attempt
	// (Duration > 0: it ran, and its context was cancelled) or before it
	// (the worker settled it without running it).
	Cancelled bool `json:"cancelled,omitempty"`
}

// Entry is one dead letter in TOOL_DLQ.
type Entry struct {
	V      int           `json:"v"`
	Reason classify.Fate `json:"reason"`
	Tool   string        `json:"tool"`
	CallID string        `json:"call_id,omitempty"`
	// Call is the original call message, byte for byte. For a malformed call
	// it may not be JSON; it is then carried in RawCall instead.
	Call    json.RawMessage `json:"call,omitempty"`
	RawCall []byte          `json:"raw_call,omitempty"`
	// Error describes the last failure, for operators.
	Error        string    `json:"error,omitempty"`
	Attempts     []Attempt `json:"attempts,omitempty"`
	FirstFailure time.Time `json:"first_failure"`
	LastFailure  time.Time `json:"last_failure"`
	// Source is where the call was in TOOL_CALLS.
	SourceSeq uint64 `json:"source_seq,omitempty"`
	// Deliveries is how many times JetStream delivered the call, when known
	// (set for poison calls, whose attempts died before they could report).
	Deliveries int `json:"deliveries,omitempty"`
}

// NewEntry builds an entry for the call message data. When data is a JSON
// value it is kept as Call, otherwise as RawCall.
func NewEntry(reason classify.Fate, tool, callID string, data []byte) Entry {
	e := Entry{V: 1, Reason: reason, Tool: tool, CallID: callID}
	if compactJSON(data) {
		e.Call = append(json.RawMessage(nil), data...)
	} else {
		e.RawCall = append([]byte(nil), data...)
	}
	return e
}

// Msg returns the NATS message that carries e to subject, with the essentials
// in headers and the call ID (or a stand-in) as Nats-Msg-Id.
func (e *Entry) Msg(subject, msgID string) (*nats.Msg, error) {
	data, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("dlq: encode entry: %w", err)
	}
	m := nats.NewMsg(subject)
	m.Data = data
	m.Header.Set(nats.MsgIdHdr, msgID)
	m.Header.Set(HeaderReason, string(e.Reason))
	m.Header.Set(HeaderTool, e.Tool)
	if e.CallID != "" {
		m.Header.Set(HeaderCallID, e.CallID)
	}
	m.Header.Set(HeaderAttempts, strconv.Itoa(e.AttemptCount()))
	if e.Error != "" {
		m.Header.Set(HeaderError, headerSafe(e.Error))
	}
	if n := len(e.Attempts); n > 0 {
		last := e.Attempts[n-1]
		m.Header.Set(HeaderClass, string(last.Class))
		m.Header.Set(HeaderCode, last.Code)
	}
	if !e.FirstFailure.IsZero() {
		m.Header.Set(HeaderFirstFailure, e.FirstFailure.UTC().Format(time.RFC3339Nano))
	}
	if !e.LastFailure.IsZero() {
		m.Header.Set(HeaderLastFailure, e.LastFailure.UTC().Format(time.RFC3339Nano))
	}
	if e.Deliveries > 0 {
		m.Header.Set(HeaderDeliveries, strconv.Itoa(e.Deliveries))
	}
	return m, nil
}

// AttemptCount is how many times the call was attempted, as far as the
// entry knows: the number of the last recorded attempt (attempts are
// numbered by delivery, so it counts attempts whose record is missing),
// the recorded attempts, or the deliveries, whichever is largest.
func (e *Entry) AttemptCount() int {
	n := max(len(e.Attempts), e.Deliveries)
	for _, a := range e.Attempts {
		n = max(n, a.N)
	}
	return n
}

// Decode reads an entry from a TOOL_DLQ message's data.
func Decode(data []byte) (*Entry, error) {
	var e Entry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("dlq: decode entry: %w", err)
	}
	if e.V != 1 {
		return nil, errors.New("dlq: decode entry: unknown version")
	}
	return &e, nil
}

// headerSafe keeps a header value on one line and short.
func headerSafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\r' || c == '\n' {
			b[i] = ' '
		}
	}
	if len(b) > 512 {
		b = b[:512]
	}
	return strings.ToValidUTF8(string(b), "")
}

// compactJSON reports whether data is JSON that encoding/json re-encodes
// unchanged (no insignificant white space, nothing it HTML-escapes), so that
// keeping it as Call preserves it byte for byte. Anything else is kept as
// RawCall.
func compactJSON(data []byte) bool {
	if !json.Valid(data) {
		return false
	}
	out, err := json.Marshal(json.RawMessage(data))
	return err == nil && bytes.Equal(out, data)
}
