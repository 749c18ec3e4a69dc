package tools

import (
	"bytes"
	"encoding/json"
	"regexp"
	"unicode/utf8"

	"github.com/toolpool/toolpool/internal/infra/jsonwire"
)

// The fast check on text.
//
// Decoding an input into Go values (maps, slices, json.Number) costs more than
// the fast check itself: about 3.5 µs and 17 allocations for a three-field
// input, against well under 1 µs for the check. checkText runs the same
// compiled checks on the JSON text: jsonwire.Valid checks the syntax, then
// the walk reads values in place, and a valid input is decided without
// allocating. Its answer is the answer check gives on the decoded input, or
// unknown where only decoding could tell:
//
//   - a string with escapes under a rule that reads it (length, pattern,
//     enum, const, format), or with invalid UTF-8 under a pattern, enum,
//     const or format;
//   - an object with a key that has escapes or invalid UTF-8, with a key given
//     twice (decoding keeps the last value), or with more than
//     maxTextMembers members;
//   - a format on an object or an array.
//
// Validate decodes only when checkText does not say valid. Like check,
// checkText is held to the engine by TestFastCheckAgreesWithEngine and
// FuzzFastCheck; TestValidateSameWithoutFastCheck holds Validate, errors
// included, to the engine alone.

// maxTextMembers is the most members of one object checkText walks; a
// larger object is left to the decoded check.
const maxTextMembers = 32

// textSpan is where a value lies in the input: input[start:end].
type textSpan struct{ start, end int }

// checkText decides input, JSON text, without decoding it. It is unknown
// when input is not exactly one JSON value.
func (f *fastSchema) checkText(input []byte) verdict {
	if !jsonwire.Valid(input) {
		return verdictUnknown
	}
	start, end := jsonwire.Trim(input)
	return f.checkSpan(input, textSpan{start, end})
}

// checkSpan decides the value at v in d, which is valid JSON. It follows
// check keyword by keyword.
func (f *fastSchema) checkSpan(d []byte, v textSpan) verdict {
	if f.always != nil {
		return boolVerdict(*f.always)
	}
	res := verdictValid
	if f.types != 0 {
		if res = f.textType(d, v); res == verdictInvalid {
			return res
		}
	}
	if f.valueRules {
		if res = res.and(f.textValueRules(d, v)); res == verdictInvalid {
			return res
		}
	}
	if f.ref != nil {
		if res = res.and(f.ref.checkSpan(d, v)); res == verdictInvalid || f.refOnly {
			return res
		}
	}
	kind := verdictValid
	switch d[v.start] {
	case '"':
		kind = f.textString(d, v)
	case '{':
		kind = f.textObject(d, v)
	case '[':
		kind = f.textArray(d, v)
	case 't', 'f', 'n':
	default:
		if f.hasNumRule {
			kind = f.textNumber(d, v)
		}
	}
	if res = res.and(kind); res == verdictInvalid || !f.applicators {
		return res
	}
	return res.and(f.textApplicators(d, v))
}

// textValueRules is checkValueRules on text.
func (f *fastSchema) textValueRules(d []byte, v textSpan) verdict {
	res := verdictValid
	if f.hasConst {
		if res = res.and(textEqual(d, v, f.constVal)); res == verdictInvalid {
			return res
		}
	}
	if f.enum != nil {
		if res = res.and(f.textEnum(d, v)); res == verdictInvalid {
			return res
		}
	}
	if f.format != nil {
		res = res.and(f.textFormat(d, v))
	}
	return res
}

// textApplicators is checkApplicators on text.
func (f *fastSchema) textApplicators(d []byte, v textSpan) verdict {
	res := verdictValid
	for _, g := range f.allOf {
		if res = res.and(g.checkSpan(d, v)); res == verdictInvalid {
			return res
		}
	}
	if f.anyOf != nil {
		if res = res.and(anyOfText(f.anyOf, d, v)); res == verdictInvalid {
			return res
		}
	}
	if f.oneOf != nil {
		if res = res.and(oneOfText(f.oneOf, d, v)); res == verdictInvalid {
			return res
		}
	}
	if f.not != nil {
		if res = res.and(notVerdict(f.not.checkSpan(d, v))); res == verdictInvalid {
			return res
		}
	}
	if f.ifS == nil {
		return res
	}
	switch f.ifS.checkSpan(d, v) {
	case verdictValid:
		if f.thenS != nil {
			res = res.and(f.thenS.checkSpan(d, v))
		}
	case verdictInvalid:
		if f.elseS != nil {
			res = res.and(f.elseS.checkSpan(d, v))
		}
	default:
		res = res.and(verdictUnknown)
	}
	return res
}

func (f *fastSchema) textType(d []byte, v textSpan) verdict {
	var t typeMask
	switch d[v.start] {
	case 'n':
		t = maskNull
	case 't', 'f':
		t = maskBoolean
	case '"':
		t = maskString
	case '[':
		t = maskArray
	case '{':
		t = maskObject
	default:
		if f.types&maskNumber != 0 {
			return verdictValid
		}
		if f.types&maskInteger == 0 {
			return verdictInvalid
		}
		if _, ok := intLiteral(d[v.start:v.end]); ok {
			return verdictValid
		}
		return verdictUnknown // 1.0 and 1e2 are integers too; the engine decides
	}
	if f.types&t != 0 {
		return verdictValid
	}
	return verdictInvalid
}

// plainText returns the inside of the string at v when it is its own value:
// no escapes, valid UTF-8.
func plainText(d []byte, v textSpan) ([]byte, bool) {
	inner := d[v.start+1 : v.end-1]
	return inner, jsonwire.Plain(inner)
}

// textEqual is equalPrimitive on text.
func textEqual(d []byte, v textSpan, want any) verdict {
	switch c := d[v.start]; c {
	case 'n':
		return boolVerdict(want == nil)
	case 't', 'f':
		w, ok := want.(bool)
		return boolVerdict(ok && w == (c == 't'))
	case '"':
		w, ok := want.(string)
		if !ok {
			return verdictInvalid
		}
		s, ok := plainText(d, v)
		if !ok {
			return verdictUnknown
		}
		return boolVerdict(string(s) == w)
	case '{', '[':
		return verdictInvalid // the schema value is primitive
	default:
		w, ok := want.(json.Number)
		if !ok {
			return verdictInvalid
		}
		lit := d[v.start:v.end]
		if string(lit) == string(w) {
			return verdictValid
		}
		a, okA := intLiteral(lit)
		b, okB := intLiteral(w)
		if okA && okB {
			return boolVerdict(a == b)
		}
		return verdictUnknown
	}
}

func (f *fastSchema) textEnum(d []byte, v textSpan) verdict {
	res := verdictInvalid
	for _, e := range f.enum {
		switch textEqual(d, v, e) {
		case verdictValid:
			return verdictValid
		case verdictUnknown:
			res = verdictUnknown
		}
	}
	return res
}

// textFormat runs the format on the value decoded as check would see it. It
// allocates: formats are rare in tool schemas.
func (f *fastSchema) textFormat(d []byte, v textSpan) verdict {
	var val any
	switch d[v.start] {
	case '"':
		s, ok := plainText(d, v)
		if !ok {
			return verdictUnknown
		}
		val = string(s)
	case 't':
		val = true
	case 'f':
		val = false
	case 'n':
		val = nil
	case '{', '[':
		return verdictUnknown
	default:
		val = json.Number(d[v.start:v.end])
	}
	return boolVerdict(f.format.Validate(val) == nil)
}

func (f *fastSchema) textString(d []byte, v textSpan) verdict {
	if f.minLen < 0 && f.maxLen < 0 && f.pattern == nil {
		return verdictValid
	}
	inner := d[v.start+1 : v.end-1]
	if bytes.IndexByte(inner, '\\') >= 0 {
		return verdictUnknown
	}
	if f.minLen >= 0 || f.maxLen >= 0 {
		// A byte of invalid UTF-8 counts as one rune, as does the U+FFFD
		// it decodes to.
		n := utf8.RuneCount(inner)
		if f.minLen >= 0 && n < f.minLen || f.maxLen >= 0 && n > f.maxLen {
			return verdictInvalid
		}
	}
	if f.pattern != nil {
		if !utf8.Valid(inner) {
			return verdictUnknown
		}
		var match bool
		if re, ok := f.pattern.(*regexp.Regexp); ok { // the engine's default: matches bytes without a copy
			match = re.Match(inner)
		} else {
			match = f.pattern.MatchString(string(inner))
		}
		if !match {
			return verdictInvalid
		}
	}
	return verdictValid
}

func (f *fastSchema) textNumber(d []byte, v textSpan) verdict {
	n, ok := intLiteral(d[v.start:v.end])
	if !ok {
		return verdictUnknown
	}
	if f.hasMin && n < f.min || f.hasMax && n > f.max || f.multipleOf != 0 && n%f.multipleOf != 0 {
		return verdictInvalid
	}
	return verdictValid
}

// textMember is one member of an object: the inside of its key's string and
// its value.
type textMember struct{ key, val textSpan }

func (f *fastSchema) textObject(d []byte, v textSpan) verdict {
	var members [maxTextMembers]textMember
	n := 0
	for i := jsonwire.SkipSpace(d, v.start+1); i < v.end && d[i] == '"'; {
		kend := jsonwire.SkipString(d, i)
		if kend < 0 || n == len(members) {
			return verdictUnknown
		}
		vstart := jsonwire.SkipSpace(d, jsonwire.SkipSpace(d, kend)+1) // past the colon
		vend := jsonwire.SkipValue(d, vstart)
		if vend < 0 {
			return verdictUnknown
		}
		key := d[i+1 : kend-1]
		if !jsonwire.Plain(key) {
			return verdictUnknown
		}
		for _, m := range members[:n] {
			if bytes.Equal(key, d[m.key.start:m.key.end]) {
				return verdictUnknown // decoding keeps the last value
			}
		}
		members[n] = textMember{key: textSpan{i + 1, kend - 1}, val: textSpan{vstart, vend}}
		n++
		i = jsonwire.SkipSpace(d, vend)
		if i < v.end && d[i] == ',' {
			i = jsonwire.SkipSpace(d, i+1)
		}
	}
	if f.minProps >= 0 && n < f.minProps || f.maxProps >= 0 && n > f.maxProps {
		return verdictInvalid
	}
	for _, name := range f.required {
		found := false
		for _, m := range members[:n] {
			if string(d[m.key.start:m.key.end]) == name {
				found = true
				break
			}
		}
		if !found {
			return verdictInvalid
		}
	}
	res := verdictValid
	for _, m := range members[:n] {
		sub, ok := f.props[string(d[m.key.start:m.key.end])]
		if !ok {
			sub = f.additional
		}
		if sub == nil {
			continue
		}
		switch sub.checkSpan(d, m.val) {
		case verdictInvalid:
			return verdictInvalid
		case verdictUnknown:
			res = verdictUnknown
		}
	}
	return res
}

func (f *fastSchema) textArray(d []byte, v textSpan) verdict {
	res := verdictValid
	n := 0
	for i := jsonwire.SkipSpace(d, v.start+1); i < v.end && d[i] != ']'; n++ {
		end := jsonwire.SkipValue(d, i)
		if end < 0 {
			return verdictUnknown
		}
		sub := f.rest
		if n < len(f.prefix) {
			sub = f.prefix[n]
		}
		if sub != nil {
			switch sub.checkSpan(d, textSpan{i, end}) {
			case verdictInvalid:
				return verdictInvalid
			case verdictUnknown:
				res = verdictUnknown
			}
		}
		i = jsonwire.SkipSpace(d, end)
		if i < v.end && d[i] == ',' {
			i = jsonwire.SkipSpace(d, i+1)
		}
	}
	if f.minItems >= 0 && n < f.minItems || f.maxItems >= 0 && n > f.maxItems {
		return verdictInvalid
	}
	return res
}

func anyOfText(alts []*fastSchema, d []byte, v textSpan) verdict {
	res := verdictInvalid
	for _, g := range alts {
		switch g.checkSpan(d, v) {
		case verdictValid:
			return verdictValid
		case verdictUnknown:
			res = verdictUnknown
		}
	}
	return res
}

func oneOfText(alts []*fastSchema, d []byte, v textSpan) verdict {
	valid, unknown := 0, false
	for _, g := range alts {
		switch g.checkSpan(d, v) {
		case verdictValid:
			valid++
		case verdictUnknown:
			unknown = true
		}
	}
	return oneOfVerdict(valid, unknown)
}

// intLiteral parses a number written as an integer without fraction or
// exponent that fits in an int64 (json.Number or text).
func intLiteral[T ~string | ~[]byte](s T) (int64, bool) {
	n, st := jsonwire.ParseInt(s)
	return n, st == jsonwire.IntOK
}
