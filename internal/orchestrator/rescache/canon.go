package rescache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
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
func (s *Store) Key(c *policy.Call) (key string, ok bool) { return keyOf(c) }

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
// one) and invalid UTF-8.
func Canonical(input []byte) ([]byte, error) {
	if !utf8.Valid(input) {
		return nil, errors.New("the input is not valid UTF-8")
	}
	if surrogateEscape(input) {
		// a lone surrogate decodes to U+FFFD: two inputs would share a form
		return nil, errors.New("the input escapes a UTF-16 surrogate")
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errNotObject
	}
	out, err := canonObject(dec, make([]byte, 0, len(input)))
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errNotObject // something after the object
	}
	return out, nil
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

// member is one member of an object in canonical form.
type member struct {
	key string
	val []byte
}

// canonObject appends the canonical form of the object whose '{' dec
// just read.
func canonObject(dec *json.Decoder, dst []byte) ([]byte, error) {
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := tok.(string) // the decoder gives only strings as keys
		v, err := canonValue(dec, nil)
		if err != nil {
			return nil, err
		}
		ms = append(ms, member{k, v})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, err
	}
	slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	dst = append(dst, '{')
	for i, m := range ms {
		if i > 0 {
			if ms[i-1].key == m.key {
				return nil, errors.New("the input holds the key " + quote(m.key) + " twice")
			}
			dst = append(dst, ',')
		}
		dst = appendString(dst, m.key)
		dst = append(dst, ':')
		dst = append(dst, m.val...)
	}
	return append(dst, '}'), nil
}

// canonValue appends the canonical form of the next value of dec.
func canonValue(dec *json.Decoder, dst []byte) ([]byte, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return canonObject(dec, dst)
		}
		// '[': the decoder gives no other opening delimiter here
		dst = append(dst, '[')
		for n := 0; dec.More(); n++ {
			if n > 0 {
				dst = append(dst, ',')
			}
			if dst, err = canonValue(dec, dst); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, err
		}
		return append(dst, ']'), nil
	case string:
		return appendString(dst, v), nil
	case json.Number:
		return append(dst, v...), nil
	case bool:
		if v {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	default: // nil
		return append(dst, "null"...), nil
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
