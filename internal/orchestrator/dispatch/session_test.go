package dispatch

import (
	"fmt"
	"testing"
	"time"
)

func runs(outs []outcome) []int {
	r := make([]int, len(outs))
	for i, o := range outs {
		r[i] = o.run
	}
	return r
}

func TestSessionTrackerCounts(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	st := newSessionTracker(1000, time.Hour)
	record := func(session string, outs ...outcome) []int {
		st.record(session, now, outs)
		return runs(outs)
	}
	fail := func(tool string) outcome { return outcome{tool: tool, isError: true} }
	ok := func(tool string) outcome { return outcome{tool: tool} }

	tests := []struct {
		session string
		outs    []outcome
		want    []int
	}{
		{"s", []outcome{fail("a"), fail("a")}, []int{1, 2}},
		{"s", []outcome{fail("b"), ok("c"), fail("a")}, []int{1, 0, 3}},
		{"t", []outcome{fail("a")}, []int{1}},
		{"s", []outcome{ok("a"), fail("a"), fail("b")}, []int{0, 1, 2}},
		{"", []outcome{fail("a"), fail("a"), fail("a")}, []int{0, 0, 0}},
	}
	for i, tc := range tests {
		if got := record(tc.session, tc.outs...); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("step %d (%s): runs %v, want %v", i, tc.session, got, tc.want)
		}
	}
	if n := st.len(); n != 2 {
		t.Errorf("%d sessions tracked, want 2", n)
	}
	// Successes that clear a session's last failure forget the session.
	record("t", ok("a"))
	record("s", ok("a"), ok("b"))
	if n := st.len(); n != 0 {
		t.Errorf("%d sessions tracked after all recovered, want 0", n)
	}
}

func TestSessionTrackerBounded(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)

	t.Run("sessions", func(t *testing.T) {
		st := newSessionTracker(sessionShards*4, time.Hour)
		for i := range 1000 {
			st.record(fmt.Sprint("s", i), now, []outcome{{tool: "a", isError: true}})
		}
		if n := st.len(); n > sessionShards*4 {
			t.Errorf("%d sessions tracked, cap %d", n, sessionShards*4)
		}
		// The most recent session is still there.
		outs := []outcome{{tool: "a", isError: true}}
		st.record("s999", now, outs)
		if outs[0].run != 2 {
			t.Errorf("most recent session run = %d, want 2", outs[0].run)
		}
	})

	t.Run("idle sessions expire", func(t *testing.T) {
		st := newSessionTracker(100, time.Minute)
		outs := []outcome{{tool: "a", isError: true}, {tool: "a", isError: true}}
		st.record("s", now, outs)
		outs = []outcome{{tool: "a", isError: true}}
		st.record("s", now.Add(2*time.Minute), outs)
		if outs[0].run != 1 {
			t.Errorf("run after idle ttl = %d, want 1", outs[0].run)
		}
	})

	t.Run("tools per session", func(t *testing.T) {
		st := newSessionTracker(100, time.Hour)
		outs := make([]outcome, 2*maxToolsPerSession)
		for i := range outs {
			outs[i] = outcome{tool: fmt.Sprint("tool", i), isError: true}
		}
		st.record("s", now, outs)
		st.record("s", now, outs)
		sh := &st.shards[0]
		for i := range st.shards {
			if len(st.shards[i].m) > 0 {
				sh = &st.shards[i]
			}
		}
		state := sh.m[scopeKeyOf("", "s")].Value.(*sessionState)
		if len(state.fails) != maxToolsPerSession {
			t.Errorf("%d tools tracked, cap %d", len(state.fails), maxToolsPerSession)
		}
	})
}
