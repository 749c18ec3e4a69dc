package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg     Config
		n       int64
		elapsed time.Duration
		want    string
	}{
		{Config{Total: 10, Unit: "letters"}, 5, 10 * time.Second,
			"[===============               ]  50%  5/10 letters  0 letters/s  eta 10s"},
		{Config{Label: "pool round 1", Total: 100, Unit: "calls"}, 100, 2 * time.Second,
			"pool round 1               [==============================] 100%  100/100 calls  50 calls/s"},
		{Config{Duration: 10 * time.Second, Unit: "calls"}, 40, 5 * time.Second,
			"[===============               ]  50%  40 calls, 5s/10s  8 calls/s"},
		{Config{Total: 4}, 0, 0, "[                              ]   0%  0/4 done  0 done/s"},
	} {
		if got := Line(tc.cfg, tc.n, tc.elapsed); got != tc.want {
			t.Errorf("Line(%+v, %d, %s) =\n%q, want\n%q", tc.cfg, tc.n, tc.elapsed, got, tc.want)
		}
	}
}

// Lines printed while the bar shows clear it first and draw it again
// under them; Finish ends its line.
func TestBarAroundLines(t *testing.T) {
	t.Parallel()
	var term, out bytes.Buffer
	b := New(&term, Config{Total: 2, Unit: "letters"})
	b.Add(1)
	b.Printf(&out, "line %d\n", 1)
	b.Add(1)
	b.Finish()
	b.Finish() // once
	if out.String() != "line 1\n" {
		t.Errorf("output %q", out.String())
	}
	// The first write clears the (not yet drawn) line for the printed one.
	if !strings.HasPrefix(term.String(), "\r\x1b[K\r[") || !strings.Contains(term.String(), " 1/2 letters") ||
		!strings.Contains(term.String(), " 2/2 letters") || !strings.HasSuffix(term.String(), "\x1b[K\n") {
		t.Errorf("terminal %q", term.String())
	}
	if n := strings.Count(term.String(), "\n"); n != 1 {
		t.Errorf("terminal has %d newlines, want 1: %q", n, term.String())
	}
}

// A nil bar (no terminal) draws nothing and still prints the lines.
func TestNilBar(t *testing.T) {
	t.Parallel()
	b := New(nil, Config{Total: 3})
	var out bytes.Buffer
	b.Start()
	b.Add(1)
	b.Printf(&out, "x\n")
	b.Finish()
	if b != nil || out.String() != "x\n" {
		t.Errorf("bar %v, output %q", b, out.String())
	}
	if Terminal(&out) != nil || IsTerminal(&out) {
		t.Error("a buffer is taken for a terminal")
	}
}

// A started bar redraws on its own until Finish.
func TestBarRedraws(t *testing.T) {
	t.Parallel()
	var term bytes.Buffer // read only after Finish, which waits for the drawing
	b := New(&term, Config{Duration: time.Second, Unit: "calls"})
	b.Start()
	time.Sleep(3 * redraw)
	b.Finish()
	if n := strings.Count(term.String(), "\r"); n < 2 {
		t.Errorf("drawn %d times in %s: %q", n, 3*redraw, term.String())
	}
}

// A started bar finished twice ends its line once; a Start after Finish
// draws nothing more.
func TestBarStartedFinishTwice(t *testing.T) {
	t.Parallel()
	var term bytes.Buffer // read only after Finish, which waits for the drawing
	b := New(&term, Config{Total: 1})
	b.Start()
	b.Start() // once
	b.Add(1)
	b.Finish()
	b.Finish() // once
	b.Start()  // over
	if n := strings.Count(term.String(), "\n"); n != 1 || !strings.Contains(term.String(), " 1/1 done") {
		t.Errorf("terminal %q, want one line ended once", term.String())
	}
}
