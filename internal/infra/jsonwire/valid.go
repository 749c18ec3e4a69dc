package jsonwire

import (
	"encoding/binary"
	"math/bits"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// encoding/json's checker walks a state machine through a function pointer
// per byte, which made json.Valid most of the cost of decoding an envelope.
// Valid accepts exactly what json.Valid accepts (a fuzz test of pkg/envelope,
// FuzzValidJSON, holds the two together) at a fraction of the cost, and
// Unquote reads a JSON string exactly as encoding/json does.

// MaxNesting is encoding/json's limit on nested arrays and objects.
const MaxNesting = 10000

// plainStringByte marks the bytes that can stand for themselves inside a JSON
// string: everything but control characters, '"' and '\\'.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// Valid reports whether data is exactly one JSON value, optionally
// surrounded by whitespace: the answer json.Valid gives, several times
// faster. The envelope decoders check messages with it; pkg/tools checks
// tool inputs.
func Valid(data []byte) bool {
	i, ok := ValidValue(data, SkipSpace(data, 0), 0)
	return ok && SkipSpace(data, i) == len(data)
}

// ValidValue checks the value starting at d[i] (nested depth levels deep)
// and returns the index just past it.
func ValidValue(d []byte, i, depth int) (int, bool) {
	if i >= len(d) {
		return i, false
	}
	switch d[i] {
	case '{':
		if depth >= MaxNesting {
			return i, false
		}
		i = SkipSpace(d, i+1)
		if i < len(d) && d[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(d) || d[i] != '"' {
				return i, false
			}
			var ok bool
			if i, ok = ValidString(d, i); !ok {
				return i, false
			}
			i = SkipSpace(d, i)
			if i >= len(d) || d[i] != ':' {
				return i, false
			}
			if i, ok = ValidValue(d, SkipSpace(d, i+1), depth+1); !ok {
				return i, false
			}
			i = SkipSpace(d, i)
			if i >= len(d) {
				return i, false
			}
			switch d[i] {
			case ',':
				i = SkipSpace(d, i+1)
			case '}':
				return i + 1, true
			default:
				return i, false
			}
		}
	case '[':
		if depth >= MaxNesting {
			return i, false
		}
		i = SkipSpace(d, i+1)
		if i < len(d) && d[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = ValidValue(d, i, depth+1); !ok {
				return i, false
			}
			i = SkipSpace(d, i)
			if i >= len(d) {
				return i, false
			}
			switch d[i] {
			case ',':
				i = SkipSpace(d, i+1)
			case ']':
				return i + 1, true
			default:
				return i, false
			}
		}
	case '"':
		return ValidString(d, i)
	case 't':
		return validLiteral(d, i, "true")
	case 'f':
		return validLiteral(d, i, "false")
	case 'n':
		return validLiteral(d, i, "null")
	default:
		return validNumber(d, i)
	}
}

func validLiteral(d []byte, i int, lit string) (int, bool) {
	if len(d)-i >= len(lit) && string(d[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

// ValidString checks the string starting at d[i] == '"' and returns the
// index just past it. Like encoding/json it does not check UTF-8 (decoding
// replaces bad bytes with U+FFFD).
func ValidString(d []byte, i int) (int, bool) {
	i++
	for {
		i = skipPlainWords(d, i)
		for i < len(d) && plainStringByte[d[i]] {
			i++
		}
		if i >= len(d) {
			return i, false
		}
		switch d[i] {
		case '"':
			return i + 1, true
		case '\\':
			i++
			if i >= len(d) {
				return i, false
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if getHex4(d[i+1:]) < 0 {
					return i, false
				}
				i += 5
			default:
				return i, false
			}
		default: // a control character
			return i, false
		}
	}
}

// Eight bytes at a time: a string's bytes are read as little-endian words and
// tested with the classic bit tricks ("determine if a word has a byte less
// than n"), so the byte loops above run only near the bytes that matter.
const (
	lowBits  = 0x0101010101010101 // 0x01 in every byte
	highBits = 0x8080808080808080 // 0x80 in every byte
)

// stringStops returns, for the 8 bytes of x, a mask whose lowest set bit is
// the high bit of the first byte that cannot stand for itself inside a JSON
// string: a control character, '"' or '\\'. It is 0 when every byte can.
// (Bits above the lowest may be wrong; only the lowest is used.)
func stringStops(x uint64) uint64 {
	control := (x - lowBits*0x20) &^ x & highBits
	quote := x ^ (lowBits * '"')
	quote = (quote - lowBits) &^ quote & highBits
	backslash := x ^ (lowBits * '\\')
	backslash = (backslash - lowBits) &^ backslash & highBits
	return control | quote | backslash
}

// skipPlainWords returns the index of the first byte at or after i that may
// need attention inside a JSON string, or of the last few bytes (fewer than
// 8) if none does. Bytes from 0x80 up are plain: UTF-8 is not checked here.
func skipPlainWords(d []byte, i int) int {
	for i+8 <= len(d) {
		if m := stringStops(binary.LittleEndian.Uint64(d[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	return i
}

// plainRun returns the index of the first '\\' or non-ASCII byte in b at or
// after i, or len(b).
func plainRun(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		backslash := x ^ (lowBits * '\\')
		if m := (x | (backslash-lowBits)&^backslash) & highBits; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(b) && b[i] < utf8.RuneSelf && b[i] != '\\'; i++ {
	}
	return i
}

// PlainASCII reports whether the inside of a valid JSON string is ASCII
// without escapes, and so is its own value.
func PlainASCII(b []byte) bool { return plainRun(b, 0) == len(b) }

// validNumber checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at d[i].
func validNumber(d []byte, i int) (int, bool) {
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i >= len(d):
		return i, false
	case d[i] == '0':
		i++
	case '1' <= d[i] && d[i] <= '9':
		i = skipDigits(d, i+1)
	default:
		return i, false
	}
	if i < len(d) && d[i] == '.' {
		j := skipDigits(d, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := skipDigits(d, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func skipDigits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

// getHex4 decodes the 4 hex digits at the start of b, or returns -1.
func getHex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// Unquote decodes the inside of a valid JSON string that holds escapes or
// invalid UTF-8, as encoding/json does: bad UTF-8 and unpaired surrogates
// become U+FFFD.
func Unquote(s []byte) (string, bool) {
	var b strings.Builder
	b.Grow(len(s))
	if !UnquoteTo(&b, s) {
		return "", false
	}
	return b.String(), true
}

// UnquoteTo is Unquote writing to b. On false, b holds part of the string.
func UnquoteTo(b *strings.Builder, s []byte) bool {
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			r++
			if r >= len(s) {
				return false
			}
			switch s[r] {
			case '"', '\\', '/':
				b.WriteByte(s[r])
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				rr := getHex4(s[r+1:])
				if rr < 0 {
					return false
				}
				r += 5
				if utf16.IsSurrogate(rr) {
					var rr1 rune = -1
					if len(s)-r >= 6 && s[r] == '\\' && s[r+1] == 'u' {
						rr1 = getHex4(s[r+2:])
					}
					if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
						r += 6
						b.WriteRune(dec)
						continue
					}
					rr = unicode.ReplacementChar
				}
				b.WriteRune(rr)
				continue
			default:
				return false
			}
			r++
		case c < utf8.RuneSelf:
			start := r
			r = plainRun(s, r)
			b.Write(s[start:r])
		default:
			rr, size := utf8.DecodeRune(s[r:])
			b.WriteRune(rr) // RuneError for a bad byte, as encoding/json
			r += size
		}
	}
	return true
}
