package envelope

import (
	"strconv"
	"time"

	"github.com/toolpool/toolpool/internal/infra/jsonwire"
)

// This file holds the append-style JSON writer the encoders use: no
// reflection, one buffer sized up front.

// appendKey appends `,"name":` (without the comma for the first member).
func appendKey(dst []byte, name string) []byte {
	if len(dst) > 0 && dst[len(dst)-1] != '{' {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

// appendStringField appends a string member, leaving it out if empty and
// omitEmpty is set.
func appendStringField(dst []byte, name, v string, omitEmpty bool) []byte {
	if omitEmpty && v == "" {
		return dst
	}
	return jsonwire.AppendString(appendKey(dst, name), v)
}

// appendIntField appends an integer member, leaving it out if zero.
func appendIntField(dst []byte, name string, v int64) []byte {
	if v == 0 {
		return dst
	}
	return strconv.AppendInt(appendKey(dst, name), v, 10)
}

// appendTimeField appends a time member in RFC 3339 with nanoseconds, the
// format encoding/json uses for time.Time.
func appendTimeField(dst []byte, name string, t time.Time) ([]byte, error) {
	return appendTime(appendKey(dst, name), t)
}

// nonNegative clamps durations and counts that carry no meaning below zero.
func nonNegative(v int64) int64 { return max(v, 0) }
