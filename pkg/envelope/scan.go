package envelope

import (
	"bytes"
	"strings"

	"github.com/toolpool/toolpool/internal/infra/jsonwire"
)

// This file holds the small JSON reader the codec is built on. The decoders
// walk the top-level object by hand while checking that the message is valid
// JSON (scanMembers): keys match exactly (encoding/json would also accept
// "ID" for "id"), a repeated key is caught, and string values are written
// one after the other into one arena and cut from it, instead of costing one
// allocation each. Every function here still checks its bounds, so malformed
// input cannot make it panic.

// trimSpace removes JSON whitespace around data.
func trimSpace(data []byte) []byte {
	i, j := jsonwire.Trim(data)
	return data[i:j]
}

// trimmed is the span of data without the whitespace around it.
func trimmed(data []byte) span {
	i, j := jsonwire.Trim(data)
	return span{i, j}
}

// scanMembers checks that data is one JSON object and nothing else, giving
// the same answer as validJSON, and records in spans where the values of the
// members it knows lie: field maps a key to an index into spans, or -1. dup
// is the first known member given twice (-1: none). ok is false when data is
// not valid JSON or not an object; the caller tells the two apart.
func scanMembers(data []byte, field func(key []byte) int, spans []span) (dup int, ok bool) {
	dup = -1
	d := data
	i := jsonwire.SkipSpace(d, 0)
	if i >= len(d) || d[i] != '{' {
		return dup, false
	}
	i = jsonwire.SkipSpace(d, i+1)
	if i < len(d) && d[i] == '}' {
		return dup, jsonwire.SkipSpace(d, i+1) == len(d)
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return dup, false
		}
		kend, ok := jsonwire.ValidString(d, i)
		if !ok {
			return dup, false
		}
		key := d[i+1 : kend-1]
		i = jsonwire.SkipSpace(d, kend)
		if i >= len(d) || d[i] != ':' {
			return dup, false
		}
		vstart := jsonwire.SkipSpace(d, i+1)
		vend, ok := jsonwire.ValidValue(d, vstart, 1)
		if !ok {
			return dup, false
		}
		if !jsonwire.PlainASCII(key) && !jsonwire.Plain(key) {
			k, _ := jsonwire.Unquote(key) // a valid string: cannot fail
			key = []byte(k)
		}
		if f := field(key); f >= 0 {
			if spans[f].present() && dup < 0 {
				dup = f
			}
			spans[f] = span{vstart, vend}
		}
		i = jsonwire.SkipSpace(d, vend)
		if i >= len(d) {
			return dup, false
		}
		switch d[i] {
		case ',':
			i = jsonwire.SkipSpace(d, i+1)
		case '}':
			return dup, jsonwire.SkipSpace(d, i+1) == len(d)
		default:
			return dup, false
		}
	}
}

// objectIter walks the members of a JSON object. Use it only on data that
// passed validJSON; on anything else it stops with bad set rather than
// panicking.
type objectIter struct {
	data []byte
	pos  int
	bad  bool
	done bool
}

// newObjectIter starts walking the object at data[start:end]. It reports false
// if that value is not an object.
func newObjectIter(data []byte, start int) (objectIter, bool) {
	start = jsonwire.SkipSpace(data, start)
	if start >= len(data) || data[start] != '{' {
		return objectIter{}, false
	}
	return objectIter{data: data, pos: start + 1}, true
}

// next returns the next member: its key (unescaped) and the bounds of its
// value in data. It reports false at the end of the object or on malformed
// data (then it.bad is set).
func (it *objectIter) next() (key []byte, vstart, vend int, ok bool) {
	if it.done || it.bad {
		return nil, 0, 0, false
	}
	d := it.data
	i := jsonwire.SkipSpace(d, it.pos)
	if i < len(d) && d[i] == ',' {
		i = jsonwire.SkipSpace(d, i+1)
	}
	if i >= len(d) {
		it.bad = true
		return nil, 0, 0, false
	}
	if d[i] == '}' {
		it.done = true
		it.pos = i + 1
		return nil, 0, 0, false
	}
	if d[i] != '"' {
		it.bad = true
		return nil, 0, 0, false
	}
	kend := jsonwire.SkipString(d, i)
	if kend < 0 {
		it.bad = true
		return nil, 0, 0, false
	}
	key = d[i+1 : kend-1]
	if !jsonwire.Plain(key) {
		k, ok := jsonwire.Unquote(key)
		if !ok {
			it.bad = true
			return nil, 0, 0, false
		}
		key = []byte(k)
	}
	i = jsonwire.SkipSpace(d, kend)
	if i >= len(d) || d[i] != ':' {
		it.bad = true
		return nil, 0, 0, false
	}
	vstart = jsonwire.SkipSpace(d, i+1)
	vend = jsonwire.SkipValue(d, vstart)
	if vend < 0 {
		it.bad = true
		return nil, 0, 0, false
	}
	it.pos = vend
	return key, vstart, vend, true
}

// span marks where a member's value lies in the message; end == 0 means the
// member was absent (no value can end at offset 0).
type span struct{ start, end int }

func (s span) present() bool { return s.end > 0 }

// reader turns values of one message into Go values.
type reader struct {
	data []byte
	// arena holds the decoded strings one after the other; each string is
	// cut from it. Reserve its size (arena.Grow) before the first string so
	// that one allocation holds them all. A string already cut stays valid
	// when the arena grows: the builder only ever appends.
	arena strings.Builder
}

func (r *reader) raw(s span) []byte { return r.data[s.start:s.end] }

func (r *reader) isNull(s span) bool { return string(r.raw(s)) == "null" }

// kind names the JSON type of the value at s, for error messages.
func (r *reader) kind(s span) string {
	v := r.raw(s)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// isString reports whether the value at s is a string.
func (r *reader) isString(s span) bool {
	v := r.raw(s)
	return len(v) >= 2 && v[0] == '"'
}

// stringSize is what the string value at s takes in the arena, give or take
// escapes.
func (r *reader) stringSize(s span) int {
	if !r.isString(s) {
		return 0
	}
	return s.end - s.start - 2
}

// string decodes the string value at s into the arena. null gives "". ok is
// false if the value is not a string.
func (r *reader) string(s span) (string, bool) {
	v := r.raw(s)
	if len(v) < 2 || v[0] != '"' {
		return "", r.isNull(s)
	}
	inner := v[1 : len(v)-1]
	if len(inner) == 0 {
		return "", true
	}
	start := r.arena.Len()
	if jsonwire.PlainASCII(inner) || jsonwire.Plain(inner) {
		r.arena.Write(inner)
	} else if !jsonwire.UnquoteTo(&r.arena, inner) { // escapes or invalid UTF-8
		return "", false
	}
	return r.arena.String()[start:], true
}

// stringIs reports whether the string value at s decodes to want, without
// keeping it.
func (r *reader) stringIs(s span, want string) bool {
	v := r.raw(s)
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	inner := v[1 : len(v)-1]
	if jsonwire.Plain(inner) {
		return string(inner) == want
	}
	got, ok := jsonwire.Unquote(inner)
	return ok && got == want
}

// blankString reports whether the string value at s is empty or only
// whitespace, without keeping it.
func (r *reader) blankString(s span) bool {
	v := r.raw(s)
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	inner := v[1 : len(v)-1]
	if jsonwire.Plain(inner) {
		return len(bytes.TrimSpace(inner)) == 0
	}
	got, ok := jsonwire.Unquote(inner)
	return ok && strings.TrimSpace(got) == ""
}

// int64 decodes the integer value at s; null gives 0.
func (r *reader) int64(s span) (int64, jsonwire.IntStatus) {
	if r.isNull(s) {
		return 0, jsonwire.IntOK
	}
	return jsonwire.ParseInt(r.raw(s))
}

// bool decodes the boolean value at s; null gives false.
func (r *reader) bool(s span) (bool, bool) {
	switch string(r.raw(s)) {
	case "true":
		return true, true
	case "false", "null":
		return false, true
	}
	return false, false
}
