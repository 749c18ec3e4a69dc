package envelope

import (
	"strconv"
	"unicode/utf8"
)

// truncNote is the sentence Truncate ends cut content with, for the model.
func truncNote(left, total int) string {
	return "\n\n[Output truncated: " + formatCount(left) + " of " + formatCount(total) +
		" bytes were left out. Ask for a smaller part, for example a narrower range or fewer results.]"
}

// shortNote is used when max is too small for truncNote.
const shortNote = "\n[truncated]"

// formatCount writes n with thousands separators: 1234567 → "1,234,567".
func formatCount(n int) string {
	s := strconv.Itoa(n)
	neg := ""
	if n < 0 {
		neg, s = "-", s[1:]
	}
	if len(s) <= 3 {
		return neg + s
	}
	b := make([]byte, 0, len(s)+len(s)/3)
	first := len(s) % 3
	if first == 0 {
		first = 3
	}
	b = append(b, s[:first]...)
	for i := first; i < len(s); i += 3 {
		b = append(b, ',')
		b = append(b, s[i:i+3]...)
	}
	return neg + string(b)
}

// cutAt returns the largest n <= limit such that s[:n] ends on a UTF-8 rune
// boundary.
func cutAt(s string, limit int) int {
	if limit >= len(s) {
		return len(s)
	}
	if limit <= 0 {
		return 0
	}
	n := limit
	// A rune is at most 4 bytes; stepping back further means s is not UTF-8
	// there, and any cut is as good as another.
	for i := 0; i < utf8.UTFMax && n > 0 && !utf8.RuneStart(s[n]); i++ {
		n--
	}
	if !utf8.RuneStart(s[n]) {
		return limit
	}
	return n
}

// Truncate returns s unchanged if it is at most max bytes. Otherwise it cuts s
// on a UTF-8 rune boundary and appends a sentence telling the model the output
// was cut, how many bytes were left out and what to ask for instead; the
// result, note included, is at most max bytes. A max too small for the
// sentence gets a shorter note, or none. max <= 0 means
// MaxContentBytesDefault.
func Truncate(s string, max int) string {
	if max <= 0 {
		max = MaxContentBytesDefault
	}
	if len(s) <= max {
		return s
	}
	// The note for the real number left out is never longer than the note
	// for len(s), so reserving that much keeps the total within max.
	reserve := len(truncNote(len(s), len(s)))
	if reserve > max {
		if len(shortNote) > max {
			return s[:cutAt(s, max)]
		}
		return s[:cutAt(s, max-len(shortNote))] + shortNote
	}
	n := cutAt(s, max-reserve)
	return s[:n] + truncNote(len(s)-n, len(s))
}

// size is what a block counts against the content cap: its text, or its raw
// bytes for a non-text block.
func (b *Block) size() int {
	if b.Type == "text" {
		return len(b.Text)
	}
	return len(b.Raw)
}

// Size returns the bytes c counts against a content cap: the length of every
// text block plus the raw size of every other block.
func (c Content) Size() int {
	n := 0
	for i := range c {
		n += c[i].size()
	}
	return n
}

// Truncate returns c unchanged if its Size is at most max. Otherwise it keeps
// the leading blocks that fit, cuts the text block that crosses the limit (on
// a rune boundary), drops the blocks after it (a non-text block that does not
// fit is dropped whole) and ends with the same note as Truncate, added to the
// last kept text block or as a text block of its own. The returned Size is at
// most max. c itself is not modified. max <= 0 means MaxContentBytesDefault.
func (c Content) Truncate(max int) Content {
	if max <= 0 {
		max = MaxContentBytesDefault
	}
	total := c.Size()
	if total <= max {
		return c
	}
	note := func(left int) string { return truncNote(left, total) }
	reserve := len(note(total))
	if reserve > max {
		// No room for the full sentence: fall back to cutting the text alone.
		return Text(Truncate(c.Text(), max))
	}
	budget := max - reserve
	out := make(Content, 0, len(c)+1)
	kept := 0
	for i := range c {
		b := c[i]
		sz := b.size()
		if sz <= budget-kept {
			out = append(out, b)
			kept += sz
			continue
		}
		if b.Type == "text" {
			n := cutAt(b.Text, budget-kept)
			if n > 0 {
				b.Text = b.Text[:n]
				out = append(out, b)
				kept += n
			}
		}
		break
	}
	msg := note(total - kept)
	if last := len(out) - 1; last >= 0 && out[last].Type == "text" {
		out[last].Text += msg
	} else {
		out = append(out, Block{Type: "text", Text: msg[2:]})
	}
	return out
}
