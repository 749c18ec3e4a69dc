package subject

import (
	"strings"
	"testing"
)

func TestValidToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"orch-1", true},
		{"Az09_-", true},
		{strings.Repeat("a", MaxTokenLen), true},
		{strings.Repeat("a", MaxTokenLen+1), false},
		{strings.Repeat("r", 5000), false},
		{"", false},
		{"a.b", false},
		{"a*", false},
		{">", false},
		{"a b", false},
		{"a\tb", false},
		{"a/b", false},
		{"a\\b", false},
		{"$JS", false},
		{"é", false},
		{"a\x00", false},
	} {
		if got := ValidToken(tc.s); got != tc.want {
			t.Errorf("ValidToken(%.20q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}
