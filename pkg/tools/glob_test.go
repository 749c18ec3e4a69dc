package tools

import (
	"encoding/json"
	"math/rand/v2"
	"path"
	"strings"
	"testing"
	"time"
)

// globMatchBacktracking is the first matcher of approval globs: path.Match
// on the part before the first "**", and every split of the rest. The
// regular expressions must mean the same.
func globMatchBacktracking(pattern, s string) bool {
	if !strings.Contains(pattern, "**") {
		ok, _ := path.Match(pattern, s)
		return ok
	}
	head, rest, _ := strings.Cut(pattern, "**")
	for i := 0; i <= len(s); i++ {
		if ok, _ := path.Match(head, s[:i]); !ok {
			continue
		}
		for j := i; j <= len(s); j++ {
			if globMatchBacktracking(rest, s[j:]) {
				return true
			}
		}
	}
	return false
}

// TestGlobSameAsPathMatch: on random globs and strings over a small
// alphabet, the compiled glob answers what the backtracking matcher does.
func TestGlobSameAsPathMatch(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(24, 1))
	// ASCII only: the backtracking matcher could split a multi-byte
	// character between its parts; and no class that matches "/":
	// path.Match commits to the first place a part after a "*" matches,
	// which such a class can make wrong (TestGlobCases).
	pieces := []string{"a", "b", "/", ".", "*", "**", "?", "[ab]", "[^a/]", "[a-b]", "[^/]", "[b-a]", "[^.-/]"}
	chars := []string{"a", "b", "/", ".", "c"}
	for range 20000 {
		var p, s strings.Builder
		for range rng.IntN(6) {
			p.WriteString(pieces[rng.IntN(len(pieces))])
		}
		for range rng.IntN(9) {
			s.WriteString(chars[rng.IntN(len(chars))])
		}
		if got, want := globMatch(p.String(), s.String()), globMatchBacktracking(p.String(), s.String()); got != want {
			t.Fatalf("globMatch(%q, %q) = %v, the backtracking matcher says %v", p.String(), s.String(), got, want)
		}
	}
}

// TestGlobCases: what a rule's author expects, and the malformed globs
// (which Check refuses) matching nothing.
func TestGlobCases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"/etc/**", "/etc/ssh/sshd_config", true},
		{"/etc/*", "/etc/ssh/sshd_config", false},
		{"/etc/*", "/etc/passwd", true},
		{"*.prod.example", "db.prod.example", true},
		{"*.prod.example", "a/db.prod.example", false},
		{"**/secrets/**", "x/y/secrets/key", true},
		{"a?c", "a/c", false},
		{"[^a]", "/", true},
		{"line*", "line\nbreak", true},
		{`a\*b`, "a*b", true},
		{`a\*b`, "axb", false},
		{`a\**b`, "a*xyzb", true}, // an escaped "*" then a star
		{"[**]", "*", true},       // "**" inside a class is two stars
		{"[a-", "a", false},
		{"[]", "]", false},
		{`a\`, `a\`, false},
		{"?", "é", true},
		{"*[^b-a]*", "./", true},        // path.Match says false: it does not try "/" for the class
		{"[^/]**[^a]/*", "é/..", false}, // not by cutting é in two
		{"", "", true},
		{"", "a", false},
	} {
		if got := globMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

// TestRequiresLinear: a rule with several "**" against a long input takes
// time in proportion to the input, not to a power of it. (The backtracking
// matcher took about 2 s for 16 KB here, and grows as the cube.)
func TestRequiresLinear(t *testing.T) {
	t.Parallel()
	r := &ApprovalRule{When: []ApprovalMatch{{Field: "input.path", Pattern: "**x**y**z"}}}
	in, _ := json.Marshal(map[string]string{"path": strings.Repeat("a/", 512<<10)}) // 1 MiB
	done := make(chan bool, 1)
	go func() { done <- r.Requires(in) }()
	select {
	case got := <-done:
		if got {
			t.Error("a path without x, y or z needs approval")
		}
	case <-time.After(time.Minute):
		t.Fatal("Requires on 1 MiB of input ran for a minute")
	}
}
