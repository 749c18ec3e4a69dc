package envelope

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFormatCount(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 65544: "65,544", 1234567: "1,234,567", 2000000: "2,000,000", -1234: "-1,234"} {
		if got := formatCount(n); got != want {
			t.Errorf("formatCount(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestTruncateUnchanged(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "short", strings.Repeat("é", 100)} {
		if got := Truncate(s, len(s)); got != s {
			t.Errorf("Truncate(%q, len) changed it to %q", s, got)
		}
	}
}

func TestTruncateNote(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("x", 2_000_000)
	got := Truncate(s, 765_433)
	if len(got) > 765_433 {
		t.Fatalf("len = %d, over max", len(got))
	}
	i := strings.Index(got, "\n\n[")
	if i < 0 {
		t.Fatalf("no note at the end of %q", got[len(got)-200:])
	}
	kept := got[:i]
	note := got[len(kept):]
	want := "\n\n[Output truncated: " + formatCount(2_000_000-len(kept)) + " of 2,000,000 bytes were left out. Ask for a smaller part, for example a narrower range or fewer results.]"
	if note != want {
		t.Errorf("note = %q, want %q", note, want)
	}
	if len(got) != 765_433 {
		t.Errorf("len = %d; the cut should use the room it has (%d)", len(got), 765_433)
	}
}

// TestTruncateProperties checks every cut point of texts with 1- to 4-byte
// runes: at most max bytes, valid UTF-8, a prefix of the original, says what
// was cut.
func TestTruncateProperties(t *testing.T) {
	t.Parallel()
	texts := []string{
		strings.Repeat("a", 400),
		strings.Repeat("é", 200),
		strings.Repeat("日本語", 60),
		strings.Repeat("😀x", 90),
	}
	for _, s := range texts {
		for max := 0; max <= len(s); max++ {
			got := Truncate(s, max)
			if max == 0 {
				if got != s { // 0 means the default cap, far above len(s)
					t.Fatalf("Truncate(s, 0) changed a short text")
				}
				continue
			}
			if len(got) > max {
				t.Fatalf("Truncate(%d-byte text, %d) = %d bytes", len(s), max, len(got))
			}
			if !utf8.ValidString(got) {
				t.Fatalf("Truncate(_, %d) cut inside a rune: %q", max, got)
			}
			if len(s) <= max {
				if got != s {
					t.Fatalf("Truncate(_, %d) changed a text that fits", max)
				}
				continue
			}
			body := got
			if i := strings.Index(got, "\n"); i >= 0 {
				body = got[:i]
				if !strings.Contains(got, "truncated") {
					t.Fatalf("Truncate(_, %d) = %q has no note", max, got)
				}
			}
			if !strings.HasPrefix(s, body) {
				t.Fatalf("Truncate(_, %d) kept %q, not a prefix", max, body)
			}
			if max >= 200 && !strings.Contains(got, "bytes were left out") {
				t.Fatalf("Truncate(_, %d) = %q lacks the full note", max, got)
			}
		}
	}
}

func TestTruncateInvalidUTF8(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("\x80", 1000)
	if got := Truncate(s, 300); len(got) > 300 || !strings.Contains(got, "left out") {
		t.Errorf("Truncate of invalid UTF-8 = %d bytes %q", len(got), got)
	}
}

func TestContentTruncate(t *testing.T) {
	t.Parallel()
	img := Block{Type: "image", Raw: json.RawMessage(`{"type":"image","source":{"data":"` + strings.Repeat("A", 300) + `"}}`)}
	long := strings.Repeat("line of output\n", 100) // 1,500 bytes
	tests := []struct {
		name      string
		c         Content
		max       int
		wantTypes []string
	}{
		{"fits", Content{{Type: "text", Text: "a"}, img}, 1000, []string{"text", "image"}},
		{"cut one text", Text(long), 500, []string{"text"}},
		{"image kept, text cut", Content{img, {Type: "text", Text: long}}, 900, []string{"image", "text"}},
		{"image that does not fit dropped", Content{{Type: "text", Text: "head"}, img, {Type: "text", Text: "tail"}}, 300, []string{"text"}},
		{"image first and too big", Content{img, {Type: "text", Text: long}}, 250, []string{"text"}},
		{"second text cut", Content{{Type: "text", Text: "first"}, {Type: "text", Text: long}}, 600, []string{"text", "text"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			orig := append(Content(nil), tt.c...)
			got := tt.c.Truncate(tt.max)
			if got.Size() > tt.max {
				t.Errorf("Size() = %d, over %d", got.Size(), tt.max)
			}
			var types []string
			for _, b := range got {
				types = append(types, b.Type)
			}
			if !reflect.DeepEqual(types, tt.wantTypes) {
				t.Errorf("blocks = %v, want %v", types, tt.wantTypes)
			}
			if !reflect.DeepEqual(tt.c, orig) {
				t.Error("Truncate modified its receiver")
			}
			fits := tt.c.Size() <= tt.max
			if noted := strings.Contains(got.Text(), "were left out"); noted == fits {
				t.Errorf("note present = %v for content that fits = %v: %q", noted, fits, got.Text())
			}
			if !fits {
				last := got[len(got)-1]
				if last.Type != "text" || !strings.HasSuffix(last.Text, "fewer results.]") {
					t.Errorf("last block = %+v, want the note at the end", last)
				}
			}
		})
	}
}

func TestContentTruncateCount(t *testing.T) {
	t.Parallel()
	c := Content{{Type: "text", Text: strings.Repeat("a", 100)}, {Type: "text", Text: strings.Repeat("b", 5000)}}
	got := c.Truncate(1000)
	text := got[1].Text
	i := strings.Index(text, "\n\n[")
	if i < 0 {
		t.Fatalf("no note in %q", text)
	}
	kept := 100 + i
	want := formatCount(5100-kept) + " of 5,100 bytes were left out"
	if !strings.Contains(text, want) {
		t.Errorf("note %q does not say %q", text[i:], want)
	}
	if strings.Trim(text[:i], "b") != "" {
		t.Errorf("second block kept %q", text[:i])
	}
}

func TestContentTruncateTinyMax(t *testing.T) {
	t.Parallel()
	c := Text(strings.Repeat("z", 1000))
	got := c.Truncate(50)
	if got.Size() > 50 || !strings.Contains(got.Text(), "truncated") {
		t.Errorf("Truncate(50) = %q", got.Text())
	}
}
