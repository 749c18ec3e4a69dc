package dispatch

import (
	"context"
	"math/rand/v2"

	"github.com/toolpool/toolpool/internal/pooltype"
)

// WithTraceparent returns ctx carrying a W3C traceparent
// ("00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>") that Dispatch
// puts on every call it publishes. An invalid value is ignored: Dispatch then
// starts a new trace. (The context's key is pooltype's, which the HTTP
// client reads too.)
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	return pooltype.WithTraceparent(ctx, traceparent)
}

// TraceparentFrom returns the valid traceparent WithTraceparent put in ctx.
func TraceparentFrom(ctx context.Context) (string, bool) { return pooltype.TraceparentFrom(ctx) }

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
func ValidTraceparent(s string) bool { return pooltype.ValidTraceparent(s) }
