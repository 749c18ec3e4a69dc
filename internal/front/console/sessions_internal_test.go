package console

import (
	"testing"
	"time"
)

// Sessions stay bounded however many browsers come without a cookie (an
// open console gives each one a session), and a new one is kept.
func TestSessionsBounded(t *testing.T) {
	s := newSessions(time.Hour)
	var last string
	for range maxSessions + 100 {
		last, _ = s.create("local")
	}
	if n := len(s.m); n > maxSessions {
		t.Errorf("%d sessions kept, want at most %d", n, maxSessions)
	}
	if s.get(last) == nil {
		t.Error("the newest session was dropped")
	}
}
