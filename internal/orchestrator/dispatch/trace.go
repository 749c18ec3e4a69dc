package dispatch

import (
	"context"
	"math/rand/v2"
)

type traceparentKey struct{}

// WithTraceparent returns ctx carrying a W3C traceparent
// ("00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>") that Dispatch
// puts on every call it publishes. An invalid value is ignored: Dispatch then
// starts a new trace.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	return context.WithValue(ctx, traceparentKey{}, traceparent)
}

// TraceparentFrom returns the valid traceparent WithTraceparent put in ctx.
func TraceparentFrom(ctx context.Context) (string, bool) {
	tp, ok := ctx.Value(traceparentKey{}).(string)
	if !ok || !ValidTraceparent(tp) {
		return "", false
	}
	return tp, true
}

// NewTraceparent returns a traceparent for a new, sampled trace with random
// trace and parent ids.
func NewTraceparent() string {
	const hexdigits = "0123456789abcdef"
	var b [55]byte
	copy(b[:], "00-")
	put := func(at int, v uint64) {
		for i := 15; i >= 0; i-- {
			b[at+i] = hexdigits[v&0xf]
			v >>= 4
		}
	}
	hi, lo, span := rand.Uint64(), rand.Uint64(), rand.Uint64()
	if hi|lo == 0 {
		lo = 1 // an all-zero trace id is invalid
	}
	if span == 0 {
		span = 1
	}
	put(3, hi)
	put(19, lo)
	b[35] = '-'
	put(36, span)
	copy(b[52:], "-01")
	return string(b[:])
}

// ValidTraceparent reports whether s is a version-00 W3C traceparent with
// non-zero trace and parent ids.
func ValidTraceparent(s string) bool {
	if len(s) != 55 || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return false
	}
	traceID, parentID, flags := s[3:35], s[36:52], s[53:55]
	return lowerHex(traceID) && !allZero(traceID) &&
		lowerHex(parentID) && !allZero(parentID) &&
		lowerHex(flags)
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
