package tools

import (
	"encoding/json"
	"unicode/utf8"
)

// check decides v, a decoded input (encoding/json with UseNumber). It never
// allocates for the common keywords.
func (f *fastSchema) check(v any) verdict {
	if f.always != nil {
		return boolVerdict(*f.always)
	}
	res := verdictValid
	if f.types != 0 {
		if res = f.checkType(v); res == verdictInvalid {
			return res
		}
	}
	if f.valueRules {
		if res = res.and(f.checkValueRules(v)); res == verdictInvalid {
			return res
		}
	}
	if f.ref != nil {
		if res = res.and(f.ref.check(v)); res == verdictInvalid || f.refOnly {
			return res
		}
	}
	var kind verdict
	switch x := v.(type) {
	case string:
		kind = f.checkString(x)
	case json.Number:
		kind = verdictValid
		if f.hasNumRule {
			kind = f.checkNumber(x)
		}
	case map[string]any:
		kind = f.checkObject(x)
	case []any:
		kind = f.checkArray(x)
	case nil, bool:
		kind = verdictValid
	default:
		return verdictUnknown
	}
	if res = res.and(kind); res == verdictInvalid || !f.applicators {
		return res
	}
	return res.and(f.checkApplicators(v))
}

// checkValueRules checks the keywords besides type that apply to any
// value: const, enum and format.
func (f *fastSchema) checkValueRules(v any) verdict {
	res := verdictValid
	if f.hasConst {
		if res = res.and(equalPrimitive(v, f.constVal)); res == verdictInvalid {
			return res
		}
	}
	if f.enum != nil {
		if res = res.and(f.checkEnum(v)); res == verdictInvalid {
			return res
		}
	}
	if f.format != nil && f.format.Validate(v) != nil {
		return verdictInvalid
	}
	return res
}

// checkApplicators checks the subschemas that apply to v itself: allOf,
// anyOf, oneOf, not, and if with then or else.
func (f *fastSchema) checkApplicators(v any) verdict {
	res := verdictValid
	for _, g := range f.allOf {
		if res = res.and(g.check(v)); res == verdictInvalid {
			return res
		}
	}
	if f.anyOf != nil {
		if res = res.and(anyOf(f.anyOf, v)); res == verdictInvalid {
			return res
		}
	}
	if f.oneOf != nil {
		if res = res.and(oneOf(f.oneOf, v)); res == verdictInvalid {
			return res
		}
	}
	if f.not != nil {
		if res = res.and(notVerdict(f.not.check(v))); res == verdictInvalid {
			return res
		}
	}
	if f.ifS == nil {
		return res
	}
	switch f.ifS.check(v) {
	case verdictValid:
		if f.thenS != nil {
			res = res.and(f.thenS.check(v))
		}
	case verdictInvalid:
		if f.elseS != nil {
			res = res.and(f.elseS.check(v))
		}
	default:
		res = res.and(verdictUnknown)
	}
	return res
}

// notVerdict is the verdict of "not" on a subschema's verdict: valid and
// invalid swap, unknown stays.
func notVerdict(r verdict) verdict {
	switch r {
	case verdictValid:
		return verdictInvalid
	case verdictInvalid:
		return verdictValid
	}
	return verdictUnknown
}

func (f *fastSchema) checkType(v any) verdict {
	var t typeMask
	switch x := v.(type) {
	case nil:
		t = maskNull
	case bool:
		t = maskBoolean
	case string:
		t = maskString
	case []any:
		t = maskArray
	case map[string]any:
		t = maskObject
	case json.Number:
		if f.types&maskNumber != 0 {
			return verdictValid
		}
		if f.types&maskInteger == 0 {
			return verdictInvalid
		}
		if _, ok := intLiteral(x); ok {
			return verdictValid
		}
		return verdictUnknown // 1.0 and 1e2 are integers too; the engine decides
	default:
		return verdictUnknown
	}
	if f.types&t != 0 {
		return verdictValid
	}
	return verdictInvalid
}

func (f *fastSchema) checkEnum(v any) verdict {
	res := verdictInvalid
	for _, e := range f.enum {
		switch equalPrimitive(v, e) {
		case verdictValid:
			return verdictValid
		case verdictUnknown:
			res = verdictUnknown
		}
	}
	return res
}

// equalPrimitive compares v with the primitive schema value want: valid if
// equal, invalid if not, unknown when only the engine can tell (1 and 1.0).
func equalPrimitive(v, want any) verdict {
	switch x := v.(type) {
	case nil:
		return boolVerdict(want == nil)
	case bool:
		w, ok := want.(bool)
		return boolVerdict(ok && w == x)
	case string:
		w, ok := want.(string)
		return boolVerdict(ok && w == x)
	case json.Number:
		w, ok := want.(json.Number)
		if !ok {
			return verdictInvalid
		}
		if w == x {
			return verdictValid
		}
		a, okA := intLiteral(x)
		b, okB := intLiteral(w)
		if okA && okB {
			return boolVerdict(a == b)
		}
		return verdictUnknown
	case map[string]any, []any:
		return verdictInvalid // the schema value is primitive
	default:
		return verdictUnknown
	}
}

func (f *fastSchema) checkString(s string) verdict {
	if f.minLen >= 0 || f.maxLen >= 0 {
		n := utf8.RuneCountInString(s)
		if f.minLen >= 0 && n < f.minLen || f.maxLen >= 0 && n > f.maxLen {
			return verdictInvalid
		}
	}
	if f.pattern != nil && !f.pattern.MatchString(s) {
		return verdictInvalid
	}
	return verdictValid
}

func (f *fastSchema) checkNumber(x json.Number) verdict {
	n, ok := intLiteral(x)
	if !ok {
		return verdictUnknown
	}
	if f.hasMin && n < f.min || f.hasMax && n > f.max || f.multipleOf != 0 && n%f.multipleOf != 0 {
		return verdictInvalid
	}
	return verdictValid
}

func (f *fastSchema) checkObject(obj map[string]any) verdict {
	if f.minProps >= 0 && len(obj) < f.minProps || f.maxProps >= 0 && len(obj) > f.maxProps {
		return verdictInvalid
	}
	for _, name := range f.required {
		if _, ok := obj[name]; !ok {
			return verdictInvalid
		}
	}
	res := verdictValid
	for name, val := range obj {
		sub, ok := f.props[name]
		if !ok {
			sub = f.additional
		}
		if sub == nil {
			continue
		}
		switch sub.check(val) {
		case verdictInvalid:
			return verdictInvalid
		case verdictUnknown:
			res = verdictUnknown
		}
	}
	return res
}

func (f *fastSchema) checkArray(arr []any) verdict {
	if f.minItems >= 0 && len(arr) < f.minItems || f.maxItems >= 0 && len(arr) > f.maxItems {
		return verdictInvalid
	}
	res := verdictValid
	for i, item := range arr {
		sub := f.rest
		if i < len(f.prefix) {
			sub = f.prefix[i]
		}
		if sub == nil {
			continue
		}
		switch sub.check(item) {
		case verdictInvalid:
			return verdictInvalid
		case verdictUnknown:
			res = verdictUnknown
		}
	}
	return res
}

func anyOf(alts []*fastSchema, v any) verdict {
	res := verdictInvalid
	for _, g := range alts {
		switch g.check(v) {
		case verdictValid:
			return verdictValid
		case verdictUnknown:
			res = verdictUnknown
		}
	}
	return res
}

func oneOf(alts []*fastSchema, v any) verdict {
	valid, unknown := 0, false
	for _, g := range alts {
		switch g.check(v) {
		case verdictValid:
			valid++
		case verdictUnknown:
			unknown = true
		}
	}
	return oneOfVerdict(valid, unknown)
}

// oneOfVerdict is oneOf's verdict from its alternatives' verdicts: valid
// of them valid, and whether any could not tell (unknown).
func oneOfVerdict(valid int, unknown bool) verdict {
	switch {
	case valid > 1:
		return verdictInvalid
	case unknown:
		return verdictUnknown
	case valid == 1:
		return verdictValid
	default:
		return verdictInvalid
	}
}
