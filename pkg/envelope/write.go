package envelope

import (
	"math/bits"
	"strconv"
	"time"
	"unicode/utf8"
)

// This file holds the append-style JSON writer the encoders use: no
// reflection, one buffer sized up front.

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD and
// U+2028/U+2029 are escaped, as encoding/json does; <, > and & are left as
// they are (the envelope is never embedded in HTML).
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Skip 8 bytes at a time while none needs escaping or is non-ASCII.
		for i+8 <= len(s) {
			x := load64(s, i)
			if m := stringStops(x) | x&highBits; m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// load64 reads s[i:i+8] as a little-endian word (the compiler makes it one
// load).
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// appendKey appends `,"name":` (without the comma for the first member).
func appendKey(dst []byte, name string) []byte {
	if len(dst) > 0 && dst[len(dst)-1] != '{' {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

// appendStringField appends a string member, leaving it out if empty and
// omitEmpty is set.
func appendStringField(dst []byte, name, v string, omitEmpty bool) []byte {
	if omitEmpty && v == "" {
		return dst
	}
	return appendString(appendKey(dst, name), v)
}

// appendIntField appends an integer member, leaving it out if zero.
func appendIntField(dst []byte, name string, v int64) []byte {
	if v == 0 {
		return dst
	}
	return strconv.AppendInt(appendKey(dst, name), v, 10)
}

// appendTimeField appends a time member in RFC 3339 with nanoseconds, the
// format encoding/json uses for time.Time.
func appendTimeField(dst []byte, name string, t time.Time) ([]byte, error) {
	return appendTime(appendKey(dst, name), t)
}

// nonNegative clamps durations and counts that carry no meaning below zero.
func nonNegative(v int64) int64 { return max(v, 0) }
