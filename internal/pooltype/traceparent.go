package pooltype

import "context"

type traceparentKey struct{}

// WithTraceparent returns ctx carrying a W3C traceparent
// ("00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>") that a
// dispatcher puts on every call it publishes and an HTTP client sends
// along. An invalid value is ignored: the dispatcher then starts a new
// trace.
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
