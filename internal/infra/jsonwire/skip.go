package jsonwire

// The walk: where strings and values end. Every function checks its bounds
// and answers -1 for what it cannot walk, so malformed input never makes it
// panic; on valid JSON it is exact.

import "bytes"

// IsSpace reports whether c is JSON whitespace.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the index of the first non-whitespace byte at or after i.
func SkipSpace(data []byte, i int) int {
	for i < len(data) && IsSpace(data[i]) {
		i++
	}
	return i
}

// SkipString returns the index just past the JSON string starting at
// data[i] == '"', or -1 if it is not terminated.
func SkipString(data []byte, i int) int {
	if i < 0 || i >= len(data) {
		return -1
	}
	i++
	for i < len(data) {
		j := bytes.IndexByte(data[i:], '"')
		if j < 0 {
			return -1
		}
		j += i
		// The quote ends the string unless an odd number of backslashes
		// precede it.
		n := 0
		for k := j - 1; k >= i && data[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		i = j + 1
	}
	return -1
}

// SkipValue returns the index just past the JSON value starting at data[i],
// or -1 if there is none. It matches brackets and skips strings; it does
// not check what lies between them.
func SkipValue(data []byte, i int) int {
	if i < 0 || i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return SkipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				if i = SkipString(data, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default:
		start := i
		for i < len(data) {
			c := data[i]
			if c == ',' || c == '}' || c == ']' || c == ':' || IsSpace(c) {
				break
			}
			i++
		}
		if i == start {
			return -1
		}
		return i
	}
}
