package httpapi

import (
	"net/http"
	"testing"
	"time"
)

func TestPrefersAsync(t *testing.T) {
	for _, tc := range []struct {
		headers []string
		async   bool
		wait    time.Duration
	}{
		{nil, false, 0},
		{[]string{"respond-async"}, true, 0},
		{[]string{"Respond-Async"}, true, 0},
		{[]string{"return=minimal, respond-async; foo=bar"}, true, 0},
		{[]string{"return=minimal", "respond-async"}, true, 0},
		{[]string{"respond-async, wait=10"}, true, 10 * time.Second},
		{[]string{"wait=\"5\", respond-async"}, true, 5 * time.Second},
		{[]string{"respond-async, wait=3600"}, true, MaxAsyncWait},
		{[]string{"respond-async, wait=-1"}, true, 0},
		{[]string{"respond-async, wait=soon"}, true, 0},
		{[]string{"respond-asyncx"}, false, 0},
		{[]string{"handling=lenient"}, false, 0},
	} {
		h := http.Header{}
		for _, v := range tc.headers {
			h.Add(HeaderPrefer, v)
		}
		async, wait := prefersAsync(h)
		if async != tc.async || wait != tc.wait {
			t.Errorf("Prefer %q: %v %v, want %v %v", tc.headers, async, wait, tc.async, tc.wait)
		}
	}
}

func TestParseWait(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"": 0, "0": 0, "30s": 30 * time.Second, "2.5": 2500 * time.Millisecond, "1h": MaxAsyncWait, "100000": MaxAsyncWait,
	} {
		if got, err := parseWait(in); err != nil || got != want {
			t.Errorf("parseWait(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"soon", "-1s", "-3", "NaN", "Inf", "1e400", "30 s"} {
		if _, err := parseWait(in); err == nil {
			t.Errorf("parseWait(%q): no error", in)
		}
	}
}
