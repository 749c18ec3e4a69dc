package builtin

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolpool/toolpool/pkg/classify"
)

// What the built-in tools share: reading their validated input, writing
// sizes and counts for the model, cutting text without splitting a
// character.

// sizeText writes a byte size for a description: "1 MiB", "256 KiB",
// "1,000 bytes".
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return countText(n) + " bytes"
}

// countText writes n with thousands separators.
func countText(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// runeCut returns the length of data without a UTF-8 sequence cut at its
// end.
func runeCut(data []byte) int {
	n := len(data)
	for i := 1; i <= utf8.UTFMax && i <= n; i++ {
		if utf8.RuneStart(data[n-i]) {
			if !utf8.FullRune(data[n-i:]) {
				return n - i
			}
			break
		}
	}
	return n
}

// decode reads the (already validated) input.
func decode(input json.RawMessage, v any) error {
	if err := json.Unmarshal(input, v); err != nil {
		return classify.Invalid("", "does not match the tool's schema")
	}
	return nil
}
