package subject

import (
	"regexp"
	"strconv"
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
		if got := pattern.MatchString(tc.s); got != tc.want {
			t.Errorf("TokenPattern on %.20q = %v, want %v", tc.s, got, tc.want)
		}
	}
}

var pattern = regexp.MustCompile(TokenPattern)

// The three forms of the rule say the same: the pattern, the words and
// ValidToken, on every byte and at the length limits.
func TestRuleFormsAgree(t *testing.T) {
	t.Parallel()
	for c := 0; c < 256; c++ {
		s := string([]byte{byte(c)})
		if ValidToken(s) != pattern.MatchString(s) {
			t.Errorf("byte %#x: ValidToken %v, TokenPattern %v", c, ValidToken(s), pattern.MatchString(s))
		}
	}
	if !strings.Contains(TokenPattern, "{1,"+strconv.Itoa(MaxTokenLen)+"}") || !strings.HasPrefix(TokenChars, "1 to "+strconv.Itoa(MaxTokenLen)+" ") {
		t.Errorf("TokenPattern %q or TokenChars %q disagree with MaxTokenLen %d", TokenPattern, TokenChars, MaxTokenLen)
	}
}
