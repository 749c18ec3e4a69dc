package jsonwire

import (
	"bytes"
	"math"
	"unicode/utf8"
)

// Trim returns the bounds of data without the JSON whitespace around it:
// data[start:end].
func Trim(data []byte) (start, end int) {
	start, end = SkipSpace(data, 0), len(data)
	for end > start && IsSpace(data[end-1]) {
		end--
	}
	return start, end
}

// Plain reports whether the inside of a valid JSON string is its own value:
// no escapes, valid UTF-8. Otherwise only Unquote can tell what it says.
func Plain(inner []byte) bool {
	return bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner)
}

// IntStatus is what ParseInt found.
type IntStatus int

// The outcomes of ParseInt.
const (
	// IntOK: an integer that fits in an int64.
	IntOK IntStatus = iota
	// IntNotInteger: not an integer without fraction or exponent.
	IntNotInteger
	// IntRange: an integer beyond the int64 range.
	IntRange
)

// ParseInt reads s, a JSON number (or a json.Number), as an int64 when it is
// written as an integer without fraction or exponent.
func ParseInt[T ~string | ~[]byte](s T) (int64, IntStatus) {
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) == 0 {
		return 0, IntNotInteger
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, IntNotInteger
		}
		if n > (math.MaxInt64+1)/10 {
			return 0, IntRange
		}
		n = n*10 + uint64(c-'0')
	}
	switch {
	case neg && n <= math.MaxInt64+1:
		return int64(-n), IntOK // -n wraps to the right value, MinInt64 included
	case !neg && n <= math.MaxInt64:
		return int64(n), IntOK
	}
	return 0, IntRange
}
