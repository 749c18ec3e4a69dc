package envelope

import (
	"strconv"

	"github.com/toolpool/toolpool/internal/infra/jsonwire"
)

// The codec is hand-written for the per-call path. This file holds what its
// two sides share: the limits and the first steps of decoding. The call
// side is in call_codec.go, the result side in result_codec.go, content
// blocks in content.go; the JSON reader they use is in scan.go, the writer
// in write.go; errors.go has DecodeError.

// Limits bounds what the codec accepts and emits. A zero or negative field
// means its default.
type Limits struct {
	// MaxInputBytes caps a call's input JSON. Default MaxInputBytesDefault.
	MaxInputBytes int
	// MaxContentBytes caps a result's text content; longer content is cut by
	// Truncate. Default MaxContentBytesDefault.
	MaxContentBytes int
}

// DefaultLimits are the limits used when none are given.
var DefaultLimits = Limits{MaxInputBytes: MaxInputBytesDefault, MaxContentBytes: MaxContentBytesDefault}

// WithDefaults returns l with every zero or negative field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxInputBytes <= 0 {
		l.MaxInputBytes = MaxInputBytesDefault
	}
	if l.MaxContentBytes <= 0 {
		l.MaxContentBytes = MaxContentBytesDefault
	}
	return l
}

// Envelope overheads: how much a call message may exceed its input limit,
// and the sanity cap on a whole result message.
const (
	// CallOverheadBytes is what a call message may carry besides its input:
	// DecodeCall refuses a message longer than MaxInputBytes+CallOverheadBytes
	// before parsing it.
	CallOverheadBytes = 64 << 10
	// MaxResultBytes is the largest result message DecodeResult parses. It is
	// far above the text cap because non-text blocks (images, documents) are
	// not cut.
	MaxResultBytes = 64 << 20
)

// scanEnvelope checks that data is one JSON object and records where the
// members field knows lie (see scanMembers). The error says what data is
// instead: not JSON, or JSON but not an object.
func scanEnvelope(data []byte, field func(key []byte) int, spans []span) (dup int, err *DecodeError) {
	dup, ok := scanMembers(data, field, spans)
	if ok {
		return dup, nil
	}
	if i := jsonwire.SkipSpace(data, 0); i < len(data) && data[i] == '{' || !jsonwire.Valid(data) {
		return -1, syntaxError("", data)
	}
	r := reader{data: data}
	return -1, malformed("", "must be a JSON object, not "+r.kind(trimmed(data)))
}

// version checks the "v" member.
func (r *reader) version(s span) *DecodeError {
	const want = "this reader understands version 1"
	if !s.present() || r.isNull(s) {
		return &DecodeError{Field: "v", Reason: "missing; " + want, Err: ErrVersion}
	}
	v, st := r.int64(s)
	if st != jsonwire.IntOK {
		return &DecodeError{Field: "v", Reason: "must be the integer 1, not " + quoteRaw(r.raw(s)), Err: ErrVersion}
	}
	if v != Version {
		return &DecodeError{Field: "v", Reason: "version " + strconv.FormatInt(v, 10) + " is not supported; " + want, Err: ErrVersion}
	}
	return nil
}
