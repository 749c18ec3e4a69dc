package envelope

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncateHead(t *testing.T) {
	t.Parallel()
	full := strings.Repeat("héllo wörld ", 5000) // 70,000 bytes
	for _, max := range []int{5, 40, 200, 1000, 60_000} {
		head := full[:max+100]
		got := TruncateHead(head, len(full), max)
		want := Truncate(full, max)
		if got != want {
			t.Errorf("max %d: TruncateHead differs from Truncate of the whole output:\n got %q\nwant %q", max, tail(got), tail(want))
		}
		if len(got) > max || !utf8.ValidString(got) {
			t.Errorf("max %d: %d bytes, valid UTF-8 %v", max, len(got), utf8.ValidString(got))
		}
	}
	if got := TruncateHead("short", 5, 100); got != "short" {
		t.Errorf("fitting output changed: %q", got)
	}
	// A total below len(head) counts as len(head).
	if got := TruncateHead("abc", 0, 100); got != "abc" {
		t.Errorf("total 0: %q", got)
	}
}

func tail(s string) string {
	if len(s) > 120 {
		return "…" + s[len(s)-120:]
	}
	return s
}
