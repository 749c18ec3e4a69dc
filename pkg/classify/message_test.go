package classify

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/envelope"
)

func TestMessageExamples(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		in   MessageInput
		want string
	}{
		{"timeout, attempts left", &TimeoutError{After: 10 * time.Second},
			MessageInput{Tool: "search_web", Attempts: 3, Timeout: 10 * time.Second},
			"The tool search_web did not answer within 10s (3 attempts). Try a different tool or answer from what you know."},
		{"timeout, exhausted", fmt.Errorf("x: %w", &TimeoutError{}),
			MessageInput{Tool: "search_web", Attempts: 3, Timeout: 10 * time.Second, Exhausted: true},
			"The tool search_web did not answer within 10s (3 attempts). Retries ran out, so the call was set aside (dead-lettered). " +
				"Do not call it again right away; try a different approach, such as another tool, or answer from what you know."},
		{"timeout, no timeout known, once", &TimeoutError{},
			MessageInput{Tool: "search_web", Attempts: 1},
			"The tool search_web did not answer in time. Try a different tool or answer from what you know."},
		{"file not found", &fs.PathError{Op: "open", Path: "/w/notes.txt", Err: syscall.ENOENT},
			MessageInput{Tool: "read_file", Attempts: 1},
			"The tool read_file failed: the file was not found. Check the path, for example by listing the directory, and call the tool again with the right one."},
		{"validation", &ValidationError{Fields: []FieldError{{"query", "is required"}, {"max_results", "must be <= 50"}}},
			MessageInput{Tool: "search_web"},
			"The arguments for search_web are invalid: max_results: must be <= 50; query: is required. Fix these fields and call the tool again."},
		{"validation without fields", &ValidationError{},
			MessageInput{Tool: "search_web"},
			"The arguments for search_web are invalid: the input does not match the tool's schema. Fix the input and call the tool again."},
		{"unknown tool", &UnknownToolError{Tool: "X", Available: []string{"c", "a", "b"}},
			MessageInput{Tool: "X"},
			"There is no tool named X. Available tools: a, b, c."},
		{"429 with Retry-After", httpErr(429, "Retry-After", "30"),
			MessageInput{Tool: "search_web", Attempts: 1},
			"The tool search_web was rate limited by its service (HTTP 429). It may work again in about 30s. Wait before calling it again, or use a different tool."},
		{"429 exhausted, no Retry-After", httpErr(429),
			MessageInput{Tool: "search_web", Attempts: 3, Exhausted: true},
			"The tool search_web was rate limited by its service (HTTP 429) on each of 3 attempts. It may work again after a short wait. " +
				"Retries ran out, so the call was set aside (dead-lettered). Do not call it again right away; try a different approach, such as another tool, or answer from what you know."},
		{"503 exhausted", httpErr(503, "Retry-After", "90"),
			MessageInput{Tool: "search_web", Attempts: 3, Exhausted: true},
			"The tool search_web failed after 3 attempts: its service is unavailable (HTTP 503). It may work again in about 1m30s. " +
				"Retries ran out, so the call was set aside (dead-lettered). Do not call it again right away; try a different approach, such as another tool, or answer from what you know."},
		{"refused, gave up for the deadline", dialErr(syscall.ECONNREFUSED),
			MessageInput{Tool: "fetch", Attempts: 2, GaveUp: true},
			"The tool fetch failed after 2 attempts: its service refused the connection. There is no time left for another attempt before the call's deadline. " +
				"Do not call it again right away; try a different approach, such as another tool, or answer from what you know."},
		{"404 once", httpErr(404),
			MessageInput{Tool: "fetch", Attempts: 1},
			"The tool fetch failed: its service found nothing at the requested address (HTTP 404). Check the address or identifier you passed; the resource may not exist."},
		{"author's message", Permanent(WithMessage(errors.New("repo archived"), "the repository is archived and cannot be changed.")),
			MessageInput{Tool: "git_push", Attempts: 1},
			"The tool git_push failed: the repository is archived and cannot be changed. Retrying the same call will not help; change the input or try a different approach."},
		{"internal", errors.New("nil pointer somewhere"),
			MessageInput{Tool: "calc", Attempts: 1},
			"The tool calc failed: it hit an internal error. This was not caused by your input; try a different approach or answer from what you know."},
		{"permission denied", fs.ErrPermission,
			MessageInput{Tool: "write_file", Attempts: 1},
			"The tool write_file failed: permission was denied. Use a path or resource the tool is allowed to access, or a different approach."},
		{"no tool name", errors.New("x"),
			MessageInput{},
			"The tool failed: it hit an internal error. This was not caused by your input; try a different approach or answer from what you know."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Classify(tc.err).Message(tc.in); got != tc.want {
				t.Errorf("Message:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestMessageOfSuccessIsEmpty(t *testing.T) {
	t.Parallel()
	if got := (Decision{}).Message(MessageInput{Tool: "x", Attempts: 2}); got != "" {
		t.Errorf("zero Decision: Message = %q, want empty", got)
	}
}

// The seed said "did not answer after 3 attempts" also for a permanent error
// that ran once. A call that ran once never mentions attempts.
func TestMessageRanOnceNeverMentionsAttempts(t *testing.T) {
	t.Parallel()
	for _, tc := range classifyCases() {
		d := Classify(tc.err)
		for _, attempts := range []int{0, 1} {
			msg := d.Message(MessageInput{Tool: "read_file", Attempts: attempts, Timeout: 5 * time.Second})
			for _, bad := range []string{"attempt", "3 times", "after 3"} {
				if strings.Contains(msg, bad) {
					t.Errorf("%s, %d attempts: message mentions %q: %q", tc.name, attempts, bad, msg)
				}
			}
		}
	}
}

func TestMessageAttemptsAndExhaustion(t *testing.T) {
	t.Parallel()
	for _, tc := range classifyCases() {
		if !tc.retryable {
			continue
		}
		d := Classify(tc.err)
		msg := d.Message(MessageInput{Tool: "search_web", Attempts: 3, Timeout: 10 * time.Second, Exhausted: true})
		for _, want := range []string{"search_web", "3 attempts", "Retries ran out", "dead-lettered", "different approach"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: exhausted message lacks %q: %q", tc.name, want, msg)
			}
		}
		if d.Code == CodeHTTP429 && !strings.Contains(msg, "rate limited") {
			t.Errorf("%s: 429 message does not mention the rate limit: %q", tc.name, msg)
		}
		if d.RetryAfter > 0 && !strings.Contains(msg, "may work again in about "+FormatDuration(d.RetryAfter)) {
			t.Errorf("%s: message does not say when it may work again: %q", tc.name, msg)
		}
	}
}

// forbidden are strings no model-facing text may contain: Go type names and
// package paths, printf accidents, secrets and internal host names from the
// errors in classifyCases.
var forbidden = []string{"*", "net.", "os.", "syscall", "errno", "Errno", "%!", "x509", "tls:", "goroutine", "0x",
	"s3cret", "abc", "token", "user:", "internal.corp", "10.1.2.3", "/etc", "/srv", "password", "<nil>", "{", "}"}

func TestMessageIsSafe(t *testing.T) {
	t.Parallel()
	for _, tc := range classifyCases() {
		d := Classify(tc.err)
		for _, in := range []MessageInput{
			{Tool: "search_web", Attempts: 1},
			{Tool: "search_web", Attempts: 3, Timeout: 10 * time.Second, Exhausted: true},
			{Tool: "search_web", Attempts: 2, GaveUp: true},
		} {
			msg := d.Message(in)
			for _, bad := range forbidden {
				if strings.Contains(msg, bad) || strings.Contains(d.Cause, bad) || strings.Contains(d.Hint, bad) {
					t.Errorf("%s: %q in model text:\ncause %q\nhint %q\nmessage %q", tc.name, bad, d.Cause, d.Hint, msg)
				}
			}
			if strings.Contains(msg, "..") || strings.Contains(msg, "  ") || !strings.HasSuffix(msg, ".") {
				t.Errorf("%s: badly punctuated: %q", tc.name, msg)
			}
			if first := msg[0]; first < 'A' || first > 'Z' {
				t.Errorf("%s: does not start with a capital: %q", tc.name, msg)
			}
		}
	}
}

// The brief's example of a leak: an error carrying a URL with a password and
// a token, wrapped the way an HTTP client wraps it.
func TestMessageDropsSecretsFromURLError(t *testing.T) {
	t.Parallel()
	errs := []error{
		&url.Error{Op: "Get", URL: secretURL, Err: dialErr(syscall.ECONNREFUSED)},
		&url.Error{Op: "Get", URL: secretURL, Err: errors.New("something unexpected")},
		Transient(&url.Error{Op: "Get", URL: secretURL, Err: errors.New("proxy said no")}),
		Permanent(httpErr(401)),
	}
	for _, err := range errs {
		d := Classify(err)
		msg := d.Message(MessageInput{Tool: "fetch", Attempts: 3, Exhausted: d.Retryable})
		for _, bad := range []string{"s3cret", "abc", "internal.corp", "user:"} {
			if strings.Contains(d.Cause, bad) || strings.Contains(msg, bad) {
				t.Errorf("Classify(%v): %q leaked into cause %q / message %q", err, bad, d.Cause, msg)
			}
		}
	}
}

func TestMessageFromHandBuiltDecision(t *testing.T) {
	t.Parallel()
	// A Decision with no cause or hint still gives a complete message.
	d := Decision{Class: envelope.ClassPermanent, Code: "custom"}
	want := "The tool t failed: it hit an internal error. Retrying the same call will not help; change the input or try a different approach."
	if got := d.Message(MessageInput{Tool: "t", Attempts: 1}); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
