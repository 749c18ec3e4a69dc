package envelope

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// The sentinels a *DecodeError wraps; match them with errors.Is.
var (
	// ErrMalformed: the message is not JSON, or a field is missing, has the
	// wrong type or an invalid value.
	ErrMalformed = errors.New("envelope: malformed")
	// ErrVersion: the "v" field is missing or names a version this package
	// does not read.
	ErrVersion = errors.New("envelope: unsupported version")
	// ErrTooLarge: the message, or a call's input, is over its size limit.
	ErrTooLarge = errors.New("envelope: too large")
)

// DecodeError says which field of an envelope is wrong and why. Encoders
// return it too, for a call or result the decoder would refuse, so that such
// a message is never published.
type DecodeError struct {
	Field  string // JSON field name, "" for the whole message
	Reason string // what is wrong, e.g. "must be a JSON object, not an array"
	Err    error  // sentinel: ErrMalformed, ErrVersion, ErrTooLarge
}

// Error reads like `envelope: field "input": must be a JSON object`.
func (e *DecodeError) Error() string {
	if e.Field == "" {
		return "envelope: " + e.Reason
	}
	return "envelope: field " + strconv.Quote(e.Field) + ": " + e.Reason
}

// Unwrap returns the sentinel, so errors.Is(err, ErrTooLarge) works.
func (e *DecodeError) Unwrap() error { return e.Err }

func malformed(field, reason string) *DecodeError {
	return &DecodeError{Field: field, Reason: reason, Err: ErrMalformed}
}

// syntaxError describes why data is not valid JSON. Only called on the error
// path: it parses data a second time to find the offending byte.
func syntaxError(field string, data []byte) *DecodeError {
	var v json.RawMessage
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	switch {
	case len(trimSpace(data)) == 0:
		return malformed(field, "empty; expected a JSON object")
	case errors.As(err, &se):
		return malformed(field, "not valid JSON: "+se.Error()+" (at byte "+strconv.FormatInt(se.Offset, 10)+")")
	default:
		return malformed(field, "not valid JSON")
	}
}

// quoteShort quotes user data for an error message, cut to a sane length.
func quoteShort(s string) string {
	const max = 40
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}

// quoteRaw is quoteShort for a raw JSON value, without copying all of it.
func quoteRaw(b []byte) string {
	return quoteShort(string(b[:min(len(b), 64)]))
}
