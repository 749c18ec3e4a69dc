package tools

import (
	"math/rand/v2"
	"path"
	"strings"
	"testing"
	"unicode/utf8"
)

// refGlobMatch is the glob's definition: path.Match, with "**" taking any
// part of s, "/" included, tried at every split between characters
// (exponential in the number of "**", so only for short strings).
func refGlobMatch(pattern, s string) bool {
	if !strings.Contains(pattern, "**") {
		ok, _ := path.Match(pattern, s)
		return ok
	}
	head, rest, _ := strings.Cut(pattern, "**")
	for i := 0; i <= len(s); i++ {
		if i < len(s) && !utf8.RuneStart(s[i]) {
			continue
		}
		if ok, _ := path.Match(head, s[:i]); !ok {
			continue
		}
		for j := i; j <= len(s); j++ {
			if j < len(s) && !utf8.RuneStart(s[j]) {
				continue
			}
			if refGlobMatch(rest, s[j:]) {
				return true
			}
		}
	}
	return false
}

// globMatch agrees with the definition on random valid patterns and
// strings, new lines and multi-byte characters included.
func TestGlobMatchAgrees(t *testing.T) {
	t.Parallel()
	pat := []string{"a", "b", "/", "*", "**", "?", "[ab]", "[^a]", "[a-c]", "[^/]", "[\\]]", "\\*", "\\a", "\n", "é", "[é-ü]", "[b-a]", "-", "."}
	str := []string{"a", "b", "c", "/", "\n", "é", "ö", "*", "-", ".", "]"}
	rng := rand.New(rand.NewPCG(24, 1))
	checked := 0
	for range 100000 {
		var p, s strings.Builder
		for range rng.IntN(6) {
			p.WriteString(pat[rng.IntN(len(pat))])
		}
		for range rng.IntN(9) {
			s.WriteString(str[rng.IntN(len(str))])
		}
		r := ApprovalRule{When: []ApprovalMatch{{Field: "input.x", Pattern: p.String()}}}
		if p.Len() == 0 || strings.Contains(p.String(), "\\**") {
			continue // the definition splits an escaped "*" and the next one as a "**"
		}
		if _, problem := r.Check(); problem != "" {
			continue
		}
		checked++
		if globRegexp(p.String()) == nil {
			t.Fatalf("Check accepts %q, which does not compile", p.String())
		}
		if got, want := globMatch(p.String(), s.String()), refGlobMatch(p.String(), s.String()); got != want {
			t.Fatalf("globMatch(%q, %q) = %v, want %v", p.String(), s.String(), got, want)
		}
	}
	if checked < 10000 {
		t.Fatalf("only %d valid patterns checked", checked)
	}
}

func TestGlobMatchCases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"/etc/**", "/etc/ssh/sshd_config", true},
		{"/etc/*", "/etc/ssh/sshd_config", false},
		{"**/.ssh/**", "/home/a/.ssh/id_ed25519", true},
		{"**/.ssh/**", "/home/a/ssh/id", false},
		{"*.prod.example", "db.prod.example", true},
		{"*.prod.example", "a/b.prod.example", false},
		{"[", "[", false},         // a bad pattern matches nothing
		{"a\\", "a\\", false},     // a bad pattern matches nothing
		{"[^a]", "/", true},       // a class may take a "/" (path.Match)
		{"?", "/", false},         // "?" may not
		{"**", "a\nb/c", true},    // "**" takes anything
		{"a[b-a]c", "abc", false}, // an empty range matches nothing
		{"a[^b-a]c", "abc", true}, // and its negation anything
		{"\\[x\\]", "[x]", true},  // escapes
		{"*/**", "a/b/c/d", true}, //
		{"**/*.go", "pkg/a.go", true},
		{"**/*.go", "pkg/a.go/x", false},
	} {
		if got := globMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

// A long input value costs time linear in its length: the value below
// took the "**"-at-every-split matcher seconds per check (16 kB, 11 s).
func TestGlobMatchLongValue(t *testing.T) {
	t.Parallel()
	v := strings.Repeat("/x", 1<<15) // 64 kB: minutes for the old matcher
	for _, p := range []string{"**/.ssh/**", "**a**b**c", "/home/**/.ssh/*"} {
		if globMatch(p, v) {
			t.Errorf("globMatch(%q, …) = true", p)
		}
	}
	if !globMatch("**/x/**", v) || !globMatch("/x/**/x", v) {
		t.Error("a long value that matches did not")
	}
}

func BenchmarkGlobMatch(b *testing.B) {
	v := strings.Repeat("/x", 8<<10) // 16 kB
	for b.Loop() {
		globMatch("**/.ssh/**", v)
	}
}
