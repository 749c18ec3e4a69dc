package console

import "testing"

// An approver reads < > & as the agent sent them; an escaped backslash
// before "u003c" stays what it is, and other escapes are kept.
func TestUnescapeHTML(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"a":"\u003cscript\u003e \u0026"}`: `{"a":"<script> &"}`,
		`{"a":"\\u003c"}`:                   `{"a":"\\u003c"}`,
		`{"a":"\"\n\u00e9\u2028"}`:          `{"a":"\"\n\u00e9\u2028"}`,
		`{"a":"\u003C\u003E"}`:              `{"a":"<>"}`,
		`{"a":"\u00"}`:                      `{"a":"\u00"}`,
		`\`:                                 `\`,
	} {
		if got := string(unescapeHTML([]byte(in))); got != want {
			t.Errorf("unescapeHTML(%s) = %s, want %s", in, got, want)
		}
	}
}
