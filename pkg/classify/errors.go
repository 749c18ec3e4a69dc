package classify

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// Sentinel errors for the outcomes the pool reports itself rather than a
// tool. Classify knows them, wrapped or not.
var (
	// errCallDeadline is a call whose overall deadline passed before it could
	// finish. Classify gives ClassTransient, CodeDeadline, not retryable.
	errCallDeadline error = &outcomeError{code: CodeDeadline, text: "the call's deadline passed"}
	// errPoison is a call whose every delivery ended without an answer
	// (the worker running it died) until the redelivery limit was reached.
	// Classify gives ClassInternal, CodePoison, not retryable.
	errPoison error = &outcomeError{code: CodePoison, text: "the call stopped every worker that ran it"}
)

// outcomeError is the type of the sentinels above: one errors.As finds any of
// them, and its code.
type outcomeError struct{ code, text string }

func (e *outcomeError) Error() string { return e.text }

// FieldError is one bad field of a tool's input.
type FieldError struct {
	Path   string // JSON path, e.g. "max_results" or "items[0].name"; "" for the root
	Reason string // e.g. "must be <= 50"
}

// String renders the field as "path: reason"; the root is "(input)".
func (f FieldError) String() string {
	p := f.Path
	if p == "" {
		p = "(input)"
	}
	return p + ": " + f.Reason
}

// ValidationError lists every bad field of a tool's input. Classify gives
// ClassValidation and CodeInvalidArgument; the fields (which come from the
// schema validator and are safe to show) are part of the model's message.
type ValidationError struct {
	Tool   string       // the tool whose input it is; may be empty
	Fields []FieldError // the bad fields, each with its reason
}

// Error lists the bad fields.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("invalid input")
	if e.Tool != "" {
		b.WriteString(" for ")
		b.WriteString(e.Tool)
	}
	for i, f := range e.Fields {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(f.String())
	}
	return b.String()
}

// UnknownToolError is a call to a tool that no one serves. Classify gives
// ClassValidation and CodeUnknownTool; the message lists the available tools.
type UnknownToolError struct {
	Tool      string   // the name the model asked for
	Available []string // the tools it could have called
}

// Error names the unknown tool.
func (e *UnknownToolError) Error() string {
	return "unknown tool " + strconv.Quote(e.Tool)
}

// HTTPError is what a tool returns for a non-2xx HTTP response. Classify reads
// the class from the status (429, 408, 425 and 5xx transient; other 4xx and
// 3xx permanent) and, for a transient status, a Retry-After from Header. A
// Retry-After date is taken relative to the response's Date header when there
// is one, so clock skew between the service and us does not matter.
type HTTPError struct {
	StatusCode int         // the response's status, e.g. 503
	Header     http.Header // Retry-After is read from here
	URL        string      // sanitized before it reaches any message
}

// NewHTTPError returns the error for a non-2xx response: its status, a copy of
// its headers, and its request URL without user info, query or fragment. It
// does not read or close the body.
func NewHTTPError(resp *http.Response) *HTTPError {
	if resp == nil {
		return &HTTPError{}
	}
	e := &HTTPError{StatusCode: resp.StatusCode, Header: resp.Header.Clone()}
	if resp.Request != nil && resp.Request.URL != nil {
		e.URL = sanitizeURL(resp.Request.URL)
	}
	return e
}

// Error gives the status and the sanitized URL: never user info, passwords or
// the query string.
func (e *HTTPError) Error() string {
	s := "http status " + strconv.Itoa(e.StatusCode)
	if t := http.StatusText(e.StatusCode); t != "" {
		s += " " + t
	}
	if e.URL != "" {
		if u, err := url.Parse(e.URL); err == nil {
			if safe := sanitizeURL(u); safe != "" {
				s += " from " + safe
			}
		}
	}
	return s
}

// retryAfter reads the Retry-After header. An HTTP date is taken relative to
// the response's Date header when it has one (so clock skew between us and
// the service does not matter), else relative to the local clock.
func (e *HTTPError) retryAfter() time.Duration {
	v := e.Header.Get("Retry-After")
	if v == "" {
		return 0
	}
	now := time.Time{}
	if date := e.Header.Get("Date"); date != "" {
		if t, err := http.ParseTime(date); err == nil {
			now = t
		}
	}
	if now.IsZero() {
		now = time.Now()
	}
	d, ok := ParseRetryAfter(v, now)
	if !ok {
		return 0
	}
	return d
}

// sanitizeURL drops user info, query and fragment.
func sanitizeURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.ForceQuery = false
	c.Fragment = ""
	c.RawFragment = ""
	return c.String()
}

// TimeoutError is an attempt that ran past its timeout, After. It matches
// context.DeadlineExceeded with errors.Is.
type TimeoutError struct {
	After time.Duration // how long the attempt ran; 0 if not known
}

// Error says how long the attempt ran.
func (e *TimeoutError) Error() string {
	if e.After <= 0 {
		return "attempt timed out"
	}
	return "attempt timed out after " + e.After.String()
}

// Is reports whether target is context.DeadlineExceeded.
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// Timeout reports true, as net.Error timeouts do.
func (e *TimeoutError) Timeout() bool { return true }

// PanicError is a recovered panic in a tool. Classify gives ClassInternal and
// CodePanic, not retryable; the panic value never reaches the model.
type PanicError struct {
	Value any // what the tool passed to panic
}

// Error includes the panic value, for logs.
func (e *PanicError) Error() string {
	switch v := e.Value.(type) {
	case error:
		return "tool panicked: " + v.Error()
	default:
		return "tool panicked: " + fmt.Sprint(v)
	}
}

// markedError forces a class on the error it wraps.
type markedError struct {
	err        error
	class      envelope.Class
	retryAfter time.Duration
}

func (e *markedError) Error() string { return e.err.Error() }
func (e *markedError) Unwrap() error { return e.err }

// Transient marks err as transient: retried with backoff. The class wins over
// what err alone would give; err's code is kept when it has one. Transient(nil)
// is nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &markedError{err: err, class: envelope.ClassTransient}
}

// Permanent marks err as permanent: never retried. The class wins over what
// err alone would give; err's code is kept when it has one. Permanent(nil) is
// nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &markedError{err: err, class: envelope.ClassPermanent}
}

// RetryAfter marks err as transient, to be retried no sooner than d (still
// capped by the policy's MaxDelay). A negative d counts as 0. RetryAfter(nil, d)
// is nil.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &markedError{err: err, class: envelope.ClassTransient, retryAfter: max(d, 0)}
}

// messageError carries a tool author's message for the model.
type messageError struct {
	err error
	msg string
}

func (e *messageError) Error() string { return e.err.Error() }
func (e *messageError) Unwrap() error { return e.err }

// WithMessage attaches msgForModel, which Classify uses verbatim as the
// Decision's Cause (so it must be safe for the model: no secrets, internal
// host names or stack traces). It does not change the class: combine it with
// Transient or Permanent as needed. Without it, an error Classify does not
// know gets a generic cause. WithMessage(nil, msg) is nil.
//
//	return classify.Permanent(classify.WithMessage(err, "the repository is archived and cannot be changed"))
func WithMessage(err error, msgForModel string) error {
	if err == nil {
		return nil
	}
	return &messageError{err: err, msg: msgForModel}
}

// Invalid is a validation error for one field: a *ValidationError.
func Invalid(field, reason string) error {
	return &ValidationError{Fields: []FieldError{{Path: field, Reason: reason}}}
}

// maxRetryAfterSeconds bounds delay-seconds so the Duration cannot overflow;
// the policy's MaxDelay caps it far below anyway.
const maxRetryAfterSeconds = 1 << 32

// ParseRetryAfter reads a Retry-After value: delay-seconds or an HTTP date
// (relative to now). ok is false for a missing or unparseable value.
//
// Delay-seconds is a non-negative integer; a decimal such as "1.5" is accepted
// too. Signs, exponents, "Inf" and "NaN" are not. A date may be in any format
// http.ParseTime knows (IMF-fixdate, RFC 850, ANSI C); a date in the past
// gives 0 with ok true.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		return parseDelaySeconds(v)
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if !t.After(now) {
		return 0, true
	}
	return t.Sub(now), true
}

// parseDelaySeconds parses digits with an optional fraction, by hand, so that
// nothing strconv.ParseFloat would also take ("1e3", "0x1p4", "1_0") slips in.
func parseDelaySeconds(v string) (time.Duration, bool) {
	var secs, frac int64
	var fracDigits int
	i := 0
	for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
		if secs < maxRetryAfterSeconds {
			secs = secs*10 + int64(v[i]-'0')
		}
	}
	if i < len(v) {
		if v[i] != '.' || i+1 == len(v) {
			return 0, false
		}
		for i++; i < len(v); i++ {
			c := v[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			if fracDigits < 9 { // nanosecond precision is plenty
				frac = frac*10 + int64(c-'0')
				fracDigits++
			}
		}
	}
	if secs >= maxRetryAfterSeconds {
		return maxRetryAfterSeconds * time.Second, true
	}
	for ; fracDigits < 9; fracDigits++ {
		frac *= 10
	}
	return time.Duration(secs)*time.Second + time.Duration(frac), true
}
