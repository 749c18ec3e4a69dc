package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestServeBacklogAgeFlag: --backlog-age reaches the orchestrator's
// config; zero, negative or not a duration is refused by name.
func TestServeBacklogAgeFlag(t *testing.T) {
	t.Parallel()
	f, err := parseServe([]string{"--backlog-age", "2m"}, io.Discard)
	if err != nil || f.backlogAge != 2*time.Minute {
		t.Fatalf("--backlog-age 2m: %+v, %v", f, err)
	}
	if f, err := parseServe(nil, io.Discard); err != nil || f.backlogAge != 30*time.Second {
		t.Errorf("default: %v, %v; want 30s", f.backlogAge, err)
	}
	for _, bad := range []string{"0", "-5s", "soon"} {
		if _, err := parseServe([]string{"--backlog-age", bad}, io.Discard); err == nil || !strings.Contains(err.Error(), "backlog-age") {
			t.Errorf("--backlog-age %s: %v; want an error naming it", bad, err)
		}
	}
}
