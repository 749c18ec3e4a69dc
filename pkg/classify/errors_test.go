package classify

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"120", 120 * time.Second, true},
		{"0", 0, true},
		{" 3 ", 3 * time.Second, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"0.25", 250 * time.Millisecond, true},
		{"2.0000000001", 2 * time.Second, true}, // beyond nanoseconds is dropped
		{"007", 7 * time.Second, true},
		{"99999999999999999999999", maxRetryAfterSeconds * time.Second, true}, // huge, but no overflow
		// HTTP dates in the three formats http.ParseTime knows.
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(time.Hour).Format(time.RFC850), time.Hour, true},
		{now.Add(time.Minute).Format(time.ANSIC), time.Minute, true},
		{now.Format(http.TimeFormat), 0, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true}, // in the past
		// Not a Retry-After value.
		{"", 0, false},
		{"   ", 0, false},
		{"-1", 0, false},
		{"+5", 0, false},
		{"1e3", 0, false},
		{"0x10", 0, false},
		{"1_000", 0, false},
		{"5.", 0, false},
		{".5", 0, false},
		{"1.2.3", 0, false},
		{"Inf", 0, false},
		{"NaN", 0, false},
		{"soon", 0, false},
		{"5 seconds", 0, false},
		{"Sun, 32 Foo 2026 25:61:00 GMT", 0, false},
	}
	for _, tc := range tests {
		got, ok := ParseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.wantOK)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "1.5", "-1", "1e3", "Sun, 01 Mar 2026 12:01:30 GMT", "Sunday, 01-Mar-26 12:00:00 GMT",
		"Sun Mar  1 12:00:00 2026", "", "NaN", "9999999999999999999999999.9"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseRetryAfter(s, now)
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, negative", s, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false; want 0 when not ok", s, d)
		}
		// Whole seconds of a sane size read exactly.
		if n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32); err == nil && !strings.HasPrefix(strings.TrimSpace(s), "+") {
			if !ok || d != time.Duration(n)*time.Second {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %ds", s, d, ok, n)
			}
		}
	})
}

func TestHTTPErrorIsSafe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url  string
		want string
	}{
		{secretURL, "http status 401 Unauthorized from http://internal.corp:8080/x"},
		{"https://api.example.com/v1/search?q=cats&key=k3y#frag", "http status 401 Unauthorized from https://api.example.com/v1/search"},
		{"", "http status 401 Unauthorized"},
		{"http://user:pa ss@%zz/?token=abc", "http status 401 Unauthorized"}, // unparseable: left out
	}
	for _, tc := range tests {
		got := (&HTTPError{StatusCode: 401, URL: tc.url}).Error()
		if got != tc.want {
			t.Errorf("Error() with URL %q = %q, want %q", tc.url, got, tc.want)
		}
	}
	if got := (&HTTPError{StatusCode: 599}).Error(); got != "http status 599" {
		t.Errorf("unknown status: %q", got)
	}
}

func TestNewHTTPError(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(secretURL)
	if err != nil {
		t.Fatal(err)
	}
	resp := &http.Response{
		StatusCode: 429,
		Header:     http.Header{"Retry-After": {"12"}},
		Request:    &http.Request{URL: u},
	}
	e := NewHTTPError(resp)
	if e.StatusCode != 429 || e.URL != "http://internal.corp:8080/x" || e.Header.Get("Retry-After") != "12" {
		t.Errorf("NewHTTPError = %+v", e)
	}
	resp.Header.Set("Retry-After", "99") // a copy, not the response's map
	if e.Header.Get("Retry-After") != "12" {
		t.Error("NewHTTPError shares the response's header map")
	}
	if u.User == nil || u.RawQuery == "" {
		t.Error("NewHTTPError changed the request's URL")
	}
	if e := NewHTTPError(nil); e.StatusCode != 0 || Classify(e).Class != internal {
		t.Errorf("NewHTTPError(nil) = %+v", e)
	}
	if e := NewHTTPError(&http.Response{StatusCode: 503}); e.URL != "" || Classify(e).Code != "http_503" {
		t.Errorf("no request: %+v", e)
	}
}

func TestErrorStrings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want string
	}{
		{&ValidationError{Tool: "search_web", Fields: []FieldError{{"query", "is required"}, {"", "bad"}}},
			"invalid input for search_web: query: is required; (input): bad"},
		{Invalid("max_results", "must be <= 50"), "invalid input: max_results: must be <= 50"},
		{&UnknownToolError{Tool: "serch"}, `unknown tool "serch"`},
		{&PanicError{Value: "boom"}, "tool panicked: boom"},
		{&PanicError{Value: 42}, "tool panicked: 42"},
		{&TimeoutError{}, "attempt timed out"},
		{errCallDeadline, "the call's deadline passed"},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}
