package rescache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/tools"
)

// keyDomain starts the hashed text, so that a cache key never equals a
// hash another part of the system makes of the same fields.
const keyDomain = "toolpool cache key v1\x00"

// KeyLen is the length of a cache key: a SHA-256 in lower-case hex.
const KeyLen = 2 * sha256.Size

// Key is the cache key of c: its tool, Info.Version, its scope, its
// tenant unless the scope is global, and its canonical input. ok is false
// when the input is not a JSON object (or holds a key twice, or invalid
// UTF-8): such a call is not cached.
//
// A Store that is not running (its Start failed: the orchestrator then
// runs without the cache) gives no key: the call runs as if its tool did
// not cache, without a look-up.
func (s *Store) Key(c *policy.Call) (key string, ok bool) {
	if !s.usable.Load() {
		return "", false
	}
	return keyOf(c)
}

// keyOf is Store.Key without a store.
func keyOf(c *policy.Call) (key string, ok bool) {
	canon, err := Canonical(c.Input)
	if err != nil {
		return "", false
	}
	scope, tenant := tools.CacheScopeTenant, c.Tenant
	if c.Info.Cache != nil && c.Info.Cache.Scope == tools.CacheScopeGlobal {
		scope, tenant = tools.CacheScopeGlobal, ""
	}
	// Each field with its length in front: no two field lists hash the
	// same text.
	b := make([]byte, 0, len(keyDomain)+5*binary.MaxVarintLen64+len(c.Tool)+len(c.Info.Version)+len(scope)+len(tenant))
	b = append(b, keyDomain...)
	for _, f := range [...]string{c.Tool, c.Info.Version, scope, tenant} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	b = binary.AppendUvarint(b, uint64(len(canon)))
	h := sha256.New()
	h.Write(b)
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil)), true
}

// validKey reports whether k has the form of a cache key: KeyLen
// characters of [0-9a-f]. Anything else (a wildcard, a dot) is refused
// before it reaches a subject.
func validKey(k string) bool {
	if len(k) != KeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// errNotObject is Canonical's error for an input that is not one JSON
// object.
var errNotObject = errors.New("the input is not a JSON object")

// Canonical returns the canonical form of input, a JSON object: every
// object's keys sorted (by their bytes), no whitespace, strings written
// with the fewest escapes, numbers as written. Two inputs that differ
// only in key order, whitespace or string escapes have the same form;
// any other difference gives another. It refuses anything but one JSON
// object, an object that holds a key twice (the tool's parser would pick
// one), invalid UTF-8 and escaped UTF-16 surrogates.
func Canonical(input []byte) ([]byte, error) {
	if !utf8.Valid(input) {
		return nil, errors.New("the input is not valid UTF-8")
	}
	if surrogateEscape(input) {
		// a lone surrogate decodes to U+FFFD: two inputs would share a form
		return nil, errors.New("the input escapes a UTF-16 surrogate")
	}
	if !json.Valid(input) { // one value, nested at most 10000 deep
		return nil, errors.New("the input is not valid JSON")
	}
	i := skipSpace(input, 0)
	if input[i] != '{' {
		return nil, errNotObject
	}
	out, _, err := appendCanon(make([]byte, 0, len(input)), input, i)
	return out, err
}

// surrogateEscape reports whether input may hold an escaped UTF-16
// surrogate (\uD800 to \uDFFF). It errs on the side of yes: such an
// input is not cached, and runs.
func surrogateEscape(input []byte) bool {
	for i := bytes.Index(input, []byte(`\u`)); i >= 0 && i+3 < len(input); {
		if c, d := input[i+2]|0x20, input[i+3]|0x20; c == 'd' && (d >= '8' && d <= '9' || d >= 'a' && d <= 'f') {
			return true
		}
		j := bytes.Index(input[i+2:], []byte(`\u`))
		if j < 0 {
			break
		}
		i += 2 + j
	}
	return false
}

// member is one member of an object: its key (the string's bytes) and
// where its value is in the input.
type member struct {
	key        []byte
	start, end int
}

// appendCanon appends the canonical form of the value of valid JSON d at
// i, and returns where the value ends.
func appendCanon(dst, d []byte, i int) ([]byte, int, error) {
	switch d[i] {
	case '{':
		var stack [8]member
		ms := stack[:0]
		for i = skipSpace(d, i+1); d[i] != '}'; {
			end := skipString(d, i)
			key, err := stringBytes(d[i:end])
			if err != nil {
				return nil, 0, err
			}
			vs := skipSpace(d, skipSpace(d, end)+1) // past the colon
			ve := skipValue(d, vs)
			ms = append(ms, member{key, vs, ve})
			if i = skipSpace(d, ve); d[i] == ',' {
				i = skipSpace(d, i+1)
			}
		}
		slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(a.key, b.key) })
		dst = append(dst, '{')
		for n, m := range ms {
			if n > 0 {
				if bytes.Equal(ms[n-1].key, m.key) {
					return nil, 0, errors.New("the input holds the key " + quote(string(m.key)) + " twice")
				}
				dst = append(dst, ',')
			}
			dst = appendString(dst, string(m.key))
			dst = append(dst, ':')
			var err error
			if dst, _, err = appendCanon(dst, d, m.start); err != nil {
				return nil, 0, err
			}
		}
		return append(dst, '}'), i + 1, nil
	case '[':
		dst = append(dst, '[')
		for i = skipSpace(d, i+1); d[i] != ']'; {
			if dst[len(dst)-1] != '[' {
				dst = append(dst, ',')
			}
			var err error
			if dst, i, err = appendCanon(dst, d, i); err != nil {
				return nil, 0, err
			}
			if i = skipSpace(d, i); d[i] == ',' {
				i = skipSpace(d, i+1)
			}
		}
		return append(dst, ']'), i + 1, nil
	case '"':
		end := skipString(d, i)
		if bytes.IndexByte(d[i:end], '\\') < 0 {
			return append(dst, d[i:end]...), end, nil // already in its canonical form
		}
		s, err := stringBytes(d[i:end])
		if err != nil {
			return nil, 0, err
		}
		return appendString(dst, string(s)), end, nil
	default: // a number, true, false, null: as written
		end := skipValue(d, i)
		return append(dst, d[i:end]...), end, nil
	}
}

// stringBytes is the content of the JSON string raw (quotes included).
func stringBytes(raw []byte) ([]byte, error) {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1], nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// skipSpace returns the index of the first byte of d at or after i that
// is not JSON whitespace.
func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string of valid JSON d at i.
func skipString(d []byte, i int) int {
	for i++; i < len(d); i++ {
		switch d[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index after the value of valid JSON d at i.
func skipValue(d []byte, i int) int {
	switch d[i] {
	case '"':
		return skipString(d, i)
	case '{', '[':
		depth := 0
		for ; i < len(d); i++ {
			switch d[i] {
			case '"':
				i = skipString(d, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	default:
		for i < len(d) && !strings.ContainsRune(",}] \t\n\r", rune(d[i])) {
			i++
		}
		return i
	}
}

// appendString appends s as a JSON string with the fewest escapes: the
// quote, the backslash and the control characters.
func appendString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// quote is s quoted for an error, cut at 40 bytes.
func quote(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return string(appendString(nil, s))
}
