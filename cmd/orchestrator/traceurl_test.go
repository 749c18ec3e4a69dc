package main

import (
	"strings"
	"testing"

	"github.com/toolpool/toolpool/internal/natstest"
)

// --trace-url takes an http(s) URL with {trace_id}; anything else is a
// usage error naming the flag.
func TestServeTraceURLFlag(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"http://127.0.0.1:16686/trace/", "ftp://h/{trace_id}", "/trace/{trace_id}"} {
		if _, err := parseServe([]string{"--trace-url", bad}, &natstest.LockedBuffer{}); err == nil || !strings.Contains(err.Error(), "--trace-url") {
			t.Errorf("--trace-url %q: %v, want a usage error naming --trace-url", bad, err)
		}
	}
	f, err := parseServe([]string{"--trace-url", "http://127.0.0.1:16686/trace/{trace_id}"}, &natstest.LockedBuffer{})
	if err != nil {
		t.Fatal(err)
	}
	if f.front.traceURL != "http://127.0.0.1:16686/trace/{trace_id}" {
		t.Errorf("traceURL %q", f.front.traceURL)
	}
}
