package rescache

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// canonicalRef is the first Canonical, on json.Decoder tokens: the
// reference the fuzz test compares the scanner with. It returns the canonical form of input, a JSON object: every
// object's keys sorted (by their bytes), no whitespace, strings written
// with the fewest escapes, numbers as written. Two inputs that differ
// only in key order, whitespace or string escapes have the same form;
// any other difference gives another. It refuses anything but one JSON
// object, an object that holds a key twice (the tool's parser would pick
// one) and invalid UTF-8.
func canonicalRef(input []byte) ([]byte, error) {
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
	out, err := refObject(dec, make([]byte, 0, len(input)))
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errNotObject // something after the object
	}
	return out, nil
}

// refMember is one member of an object in canonical form.
type refMember struct {
	key string
	val []byte
}

// canonObject appends the canonical form of the object whose '{' dec
// just read.
func refObject(dec *json.Decoder, dst []byte) ([]byte, error) {
	var ms []refMember
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := tok.(string) // the decoder gives only strings as keys
		v, err := refValue(dec, nil)
		if err != nil {
			return nil, err
		}
		ms = append(ms, refMember{k, v})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, err
	}
	slices.SortFunc(ms, func(a, b refMember) int { return strings.Compare(a.key, b.key) })
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
func refValue(dec *json.Decoder, dst []byte) ([]byte, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return refObject(dec, dst)
		}
		// '[': the decoder gives no other opening delimiter here
		dst = append(dst, '[')
		for n := 0; dec.More(); n++ {
			if n > 0 {
				dst = append(dst, ',')
			}
			if dst, err = refValue(dec, dst); err != nil {
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
