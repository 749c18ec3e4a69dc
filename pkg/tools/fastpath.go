package tools

import (
	"encoding/json"
	"math/big"
	"reflect"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The fast check.
//
// The engine validates a three-field input in about 5 µs with 34
// allocations, most of them for math/big arithmetic on every number it
// compares and for per-property bookkeeping. Most calls are valid, and a valid
// input needs no error tree. So the registry compiles, from the engine's own
// compiled schema, a small checker for the keywords tool schemas use, which
// answers valid, invalid or unknown without allocating. Only "valid" is
// trusted: invalid and unknown inputs go to the engine, which writes the
// errors. A schema that uses any keyword outside the list below gets no fast
// check at all, so the fast check can only be incomplete, never different.
// It runs first on the input's JSON text (checkText, fastpath_text.go), and
// on the decoded input only when the text alone cannot decide.
// TestFastCheckAgreesWithEngine and FuzzFastCheck hold both to the engine.

type verdict uint8

const (
	verdictUnknown verdict = iota
	verdictValid
	verdictInvalid
)

// JSON types as a bit set.
type typeMask uint8

const (
	maskNull typeMask = 1 << iota
	maskBoolean
	maskNumber
	maskInteger
	maskString
	maskArray
	maskObject
)

var typeBits = map[string]typeMask{
	"null": maskNull, "boolean": maskBoolean, "number": maskNumber, "integer": maskInteger,
	"string": maskString, "array": maskArray, "object": maskObject,
}

// fastSchema is one compiled (sub)schema of the fast check.
type fastSchema struct {
	always *bool // a boolean schema

	types    typeMask // 0: any type
	hasConst bool
	constVal any
	enum     []any // nil: no enum
	format   *jsonschema.Format
	ref      *fastSchema
	refOnly  bool // before draft 2019-09 "$ref" ends the checks

	// strings
	minLen, maxLen int // -1: none
	pattern        jsonschema.Regexp

	// numbers: inclusive bounds on integers; only integer inputs are decided
	hasNumRule bool
	hasMin     bool
	min        int64
	hasMax     bool
	max        int64
	multipleOf int64 // 0: none

	// objects
	minProps, maxProps int // -1: none
	required           []string
	props              map[string]*fastSchema
	additional         *fastSchema // nil: any property allowed

	// arrays
	minItems, maxItems int // -1: none
	prefix             []*fastSchema
	rest               *fastSchema // items after prefix; nil: anything

	allOf, anyOf, oneOf []*fastSchema
	not                 *fastSchema
	ifS, thenS, elseS   *fastSchema
}

// fastFields are the exported fields of jsonschema.Schema the fast check
// reads or may ignore (annotations, identifiers). A schema with any other
// field set gets no fast check; this also covers fields a newer engine
// version may add.
var fastFields = map[string]bool{
	// annotations and identifiers: no effect on validity
	"DraftVersion": true, "Location": true, "ID": true, "Anchor": true,
	"DynamicAnchor": true, "RecursiveAnchor": true, "Title": true, "Description": true,
	"Default": true, "Comment": true, "ReadOnly": true, "WriteOnly": true,
	"Examples": true, "Deprecated": true,
	// checked
	"Bool": true, "Ref": true, "Types": true, "Enum": true, "Const": true, "Format": true,
	"Not": true, "AllOf": true, "AnyOf": true, "OneOf": true, "If": true, "Then": true, "Else": true,
	"MinLength": true, "MaxLength": true, "Pattern": true,
	"Minimum": true, "Maximum": true, "ExclusiveMinimum": true, "ExclusiveMaximum": true, "MultipleOf": true,
	"MinProperties": true, "MaxProperties": true, "Required": true, "Properties": true, "AdditionalProperties": true,
	"MinItems": true, "MaxItems": true, "Items": true, "AdditionalItems": true, "PrefixItems": true, "Items2020": true,
}

// compileFast builds the fast check for sch, or returns nil when sch uses
// something the fast check does not handle.
func compileFast(sch *jsonschema.Schema) *fastSchema {
	fc := fastCompiler{memo: map[*jsonschema.Schema]*fastSchema{}, ok: true}
	root := fc.compile(sch)
	if !fc.ok || hasSameValueCycle(root) {
		return nil
	}
	return root
}

type fastCompiler struct {
	memo map[*jsonschema.Schema]*fastSchema
	ok   bool
}

func (fc *fastCompiler) fail() *fastSchema {
	fc.ok = false
	return nil
}

func (fc *fastCompiler) compile(s *jsonschema.Schema) *fastSchema {
	if s == nil {
		return nil
	}
	if f, ok := fc.memo[s]; ok {
		return f
	}
	f := &fastSchema{minLen: -1, maxLen: -1, minProps: -1, maxProps: -1, minItems: -1, maxItems: -1}
	fc.memo[s] = f

	rv := reflect.ValueOf(s).Elem()
	rt := rv.Type()
	for i := range rt.NumField() {
		sf := rt.Field(i)
		if sf.IsExported() && !fastFields[sf.Name] && !rv.Field(i).IsZero() {
			return fc.fail()
		}
	}

	if s.Bool != nil {
		b := *s.Bool
		f.always = &b
		return f
	}
	if s.Types != nil {
		for _, t := range s.Types.ToStrings() {
			f.types |= typeBits[t]
		}
	}
	if s.Const != nil {
		if !primitive(*s.Const) {
			return fc.fail()
		}
		f.hasConst, f.constVal = true, *s.Const
	}
	if s.Enum != nil {
		for _, v := range s.Enum.Values {
			if !primitive(v) {
				return fc.fail()
			}
		}
		f.enum = s.Enum.Values
	}
	f.format = s.Format
	f.ref = fc.compile(s.Ref)
	f.refOnly = s.Ref != nil && s.DraftVersion < 2019

	f.minLen, f.maxLen = intOr(s.MinLength), intOr(s.MaxLength)
	f.pattern = s.Pattern

	if !fc.numberRules(f, s) {
		return fc.fail()
	}

	f.minProps, f.maxProps = intOr(s.MinProperties), intOr(s.MaxProperties)
	f.required = s.Required
	if len(s.Properties) > 0 {
		f.props = make(map[string]*fastSchema, len(s.Properties))
		for name, p := range s.Properties {
			f.props[name] = fc.compile(p)
		}
	}
	f.additional = fc.additional(s.AdditionalProperties)

	f.minItems, f.maxItems = intOr(s.MinItems), intOr(s.MaxItems)
	if s.DraftVersion >= 2020 {
		f.prefix = fc.compileAll(s.PrefixItems)
		f.rest = fc.compile(s.Items2020)
	} else {
		switch items := s.Items.(type) {
		case *jsonschema.Schema:
			f.rest = fc.compile(items)
		case []*jsonschema.Schema:
			f.prefix = fc.compileAll(items)
			f.rest = fc.additional(s.AdditionalItems)
		}
	}

	f.allOf, f.anyOf, f.oneOf = fc.compileAll(s.AllOf), fc.compileAll(s.AnyOf), fc.compileAll(s.OneOf)
	f.not = fc.compile(s.Not)
	f.ifS, f.thenS, f.elseS = fc.compile(s.If), fc.compile(s.Then), fc.compile(s.Else)
	return f
}

func (fc *fastCompiler) compileAll(ss []*jsonschema.Schema) []*fastSchema {
	if len(ss) == 0 {
		return nil
	}
	out := make([]*fastSchema, len(ss))
	for i, s := range ss {
		out[i] = fc.compile(s)
	}
	return out
}

// additional compiles an additionalProperties or additionalItems value: nil,
// a bool or a schema.
func (fc *fastCompiler) additional(v any) *fastSchema {
	switch a := v.(type) {
	case nil:
		return nil
	case bool:
		if a {
			return nil
		}
		return &fastSchema{always: &a}
	case *jsonschema.Schema:
		return fc.compile(a)
	default:
		return fc.fail()
	}
}

// numberRules turns the number keywords into inclusive int64 bounds. It
// reports false for a bound the fast check cannot represent.
func (fc *fastCompiler) numberRules(f *fastSchema, s *jsonschema.Schema) bool {
	lower := func(r *big.Rat, exclusive bool) bool {
		if r == nil {
			return true
		}
		f.hasNumRule = true
		n, ok := ceilInt64(r, exclusive)
		if !ok {
			return r.Sign() < 0 // below every int64: no bound at all
		}
		if !f.hasMin || n > f.min {
			f.hasMin, f.min = true, n
		}
		return true
	}
	upper := func(r *big.Rat, exclusive bool) bool {
		if r == nil {
			return true
		}
		f.hasNumRule = true
		n, ok := floorInt64(r, exclusive)
		if !ok {
			return r.Sign() > 0 // above every int64: no bound at all
		}
		if !f.hasMax || n < f.max {
			f.hasMax, f.max = true, n
		}
		return true
	}
	if !lower(s.Minimum, false) || !lower(s.ExclusiveMinimum, true) ||
		!upper(s.Maximum, false) || !upper(s.ExclusiveMaximum, true) {
		return false
	}
	if m := s.MultipleOf; m != nil {
		f.hasNumRule = true
		if !m.IsInt() || !m.Num().IsInt64() || m.Num().Int64() <= 0 {
			return false
		}
		f.multipleOf = m.Num().Int64()
	}
	return true
}

// ceilInt64 is the least int64 n with n >= r (n > r when exclusive).
func ceilInt64(r *big.Rat, exclusive bool) (int64, bool) {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int)) // floor division: denominators are positive
	if m.Sign() != 0 || exclusive {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64(), q.IsInt64()
}

// floorInt64 is the greatest int64 n with n <= r (n < r when exclusive).
func floorInt64(r *big.Rat, exclusive bool) (int64, bool) {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() == 0 && exclusive {
		q.Sub(q, big.NewInt(1))
	}
	return q.Int64(), q.IsInt64()
}

func intOr(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// primitive reports whether v is a JSON null, boolean, number or string.
func primitive(v any) bool {
	switch v.(type) {
	case nil, bool, string, json.Number:
		return true
	}
	return false
}

// hasSameValueCycle reports whether a schema can reach itself without
// moving into a property or an item ({"$ref": "#"} at the root): the fast
// check would recurse forever, the engine reports such a cycle.
func hasSameValueCycle(root *fastSchema) bool {
	const (
		visiting = 1
		done     = 2
	)
	state := map[*fastSchema]int{}
	var visit func(f *fastSchema) bool
	visit = func(f *fastSchema) bool {
		if f == nil {
			return false
		}
		switch state[f] {
		case visiting:
			return true
		case done:
			return false
		}
		state[f] = visiting
		same := []*fastSchema{f.ref, f.not, f.ifS, f.thenS, f.elseS}
		same = append(same, f.allOf...)
		same = append(same, f.anyOf...)
		same = append(same, f.oneOf...)
		for _, g := range same {
			if visit(g) {
				return true
			}
		}
		state[f] = done
		// Children validate other values; a cycle through them ends with the
		// input. They still need their own same-value check.
		children := []*fastSchema{f.additional, f.rest}
		children = append(children, f.prefix...)
		for _, g := range f.props {
			children = append(children, g)
		}
		for _, g := range children {
			if visit(g) {
				return true
			}
		}
		return false
	}
	return visit(root)
}

// check decides v. It never allocates for the common keywords.
func (f *fastSchema) check(v any) verdict {
	if f.always != nil {
		if *f.always {
			return verdictValid
		}
		return verdictInvalid
	}
	res := verdictValid
	note := func(r verdict) bool { // reports whether r settles the result as invalid
		if r == verdictInvalid {
			return true
		}
		if r == verdictUnknown {
			res = verdictUnknown
		}
		return false
	}

	if f.types != 0 && note(f.checkType(v)) {
		return verdictInvalid
	}
	if f.hasConst && note(equalPrimitive(v, f.constVal)) {
		return verdictInvalid
	}
	if f.enum != nil && note(f.checkEnum(v)) {
		return verdictInvalid
	}
	if f.format != nil && f.format.Validate(v) != nil {
		return verdictInvalid
	}
	if f.ref != nil {
		if note(f.ref.check(v)) {
			return verdictInvalid
		}
		if f.refOnly {
			return res
		}
	}

	switch x := v.(type) {
	case string:
		if note(f.checkString(x)) {
			return verdictInvalid
		}
	case json.Number:
		if f.hasNumRule && note(f.checkNumber(x)) {
			return verdictInvalid
		}
	case map[string]any:
		if note(f.checkObject(x)) {
			return verdictInvalid
		}
	case []any:
		if note(f.checkArray(x)) {
			return verdictInvalid
		}
	case nil, bool:
	default:
		return verdictUnknown
	}

	for _, g := range f.allOf {
		if note(g.check(v)) {
			return verdictInvalid
		}
	}
	if f.anyOf != nil && note(anyOf(f.anyOf, v)) {
		return verdictInvalid
	}
	if f.oneOf != nil && note(oneOf(f.oneOf, v)) {
		return verdictInvalid
	}
	if f.not != nil {
		switch f.not.check(v) {
		case verdictValid:
			return verdictInvalid
		case verdictUnknown:
			res = verdictUnknown
		}
	}
	if f.ifS != nil {
		switch f.ifS.check(v) {
		case verdictValid:
			if f.thenS != nil && note(f.thenS.check(v)) {
				return verdictInvalid
			}
		case verdictInvalid:
			if f.elseS != nil && note(f.elseS.check(v)) {
				return verdictInvalid
			}
		default:
			res = verdictUnknown
		}
	}
	return res
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

func boolVerdict(ok bool) verdict {
	if ok {
		return verdictValid
	}
	return verdictInvalid
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
