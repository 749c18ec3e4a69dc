package jsonwire

import "testing"

func TestSkipValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		at   int
		want int
	}{
		{`"abc",`, 0, 5},
		{`"a\"b"`, 0, 6},
		{`"a\\"x`, 0, 5},
		{`"open`, 0, -1},
		{`{"a":[1,{"b":"}"}]} `, 0, 19},
		{`[1,2`, 0, -1},
		{`123 ,`, 0, 3},
		{`true}`, 0, 4},
		{`null]`, 0, 4},
		{`x`, 5, -1},
		{`,`, 0, -1},
	} {
		if got := SkipValue([]byte(tc.in), tc.at); got != tc.want {
			t.Errorf("SkipValue(%q, %d) = %d, want %d", tc.in, tc.at, got, tc.want)
		}
	}
}

func TestSkipSpaceAndString(t *testing.T) {
	t.Parallel()
	if got := SkipSpace([]byte(" \t\r\n x"), 0); got != 5 {
		t.Errorf("SkipSpace = %d, want 5", got)
	}
	if got := SkipString([]byte(`"x"`), -1); got != -1 {
		t.Errorf("SkipString before the start = %d, want -1", got)
	}
}
