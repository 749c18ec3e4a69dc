package jsonwire

import (
	"math/bits"
	"unicode/utf8"
)

// The writer: JSON strings appended to a buffer, eight bytes at a time
// where nothing needs escaping.

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD and
// U+2028/U+2029 are escaped, as encoding/json does; <, > and & are left as
// they are (the envelope is never embedded in HTML).
func AppendString(dst []byte, s string) []byte {
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

// HasControl reports whether s holds an ASCII control character (below
// 0x20, or DEL). The envelope's ids and trace context travel in NATS
// headers too, where CR or LF would break the frame.
func HasControl(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := load64(s, i)
		del := x ^ (lowBits * 0x7f)
		if ((x-lowBits*0x20)&^x|(del-lowBits)&^del)&highBits != 0 {
			return true
		}
	}
	for ; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}
