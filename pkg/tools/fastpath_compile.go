package tools

import (
	"encoding/json"
	"math/big"
	"reflect"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

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

// compile compiles s, or fails the compiler when s uses a keyword the fast
// check does not handle. A schema met again (a "$ref" cycle) compiles once.
func (fc *fastCompiler) compile(s *jsonschema.Schema) *fastSchema {
	if s == nil {
		return nil
	}
	if f, ok := fc.memo[s]; ok {
		return f
	}
	f := &fastSchema{minLen: -1, maxLen: -1, minProps: -1, maxProps: -1, minItems: -1, maxItems: -1}
	fc.memo[s] = f
	if !onlyFastFields(s) {
		return fc.fail()
	}
	if s.Bool != nil {
		b := *s.Bool
		f.always = &b
		return f
	}
	if !fc.valueRules(f, s) || !fc.numberRules(f, s) {
		return fc.fail()
	}
	f.minLen, f.maxLen = intOr(s.MinLength), intOr(s.MaxLength)
	f.pattern = s.Pattern
	fc.objectRules(f, s)
	fc.arrayRules(f, s)
	fc.applicators(f, s)
	return f
}

// onlyFastFields reports whether s sets no field outside fastFields.
func onlyFastFields(s *jsonschema.Schema) bool {
	rv := reflect.ValueOf(s).Elem()
	rt := rv.Type()
	for i := range rt.NumField() {
		sf := rt.Field(i)
		if sf.IsExported() && !fastFields[sf.Name] && !rv.Field(i).IsZero() {
			return false
		}
	}
	return true
}

// valueRules compiles the keywords that apply to any value: type, const,
// enum, format and $ref. It reports false for a const or enum value that is
// not primitive.
func (fc *fastCompiler) valueRules(f *fastSchema, s *jsonschema.Schema) bool {
	if s.Types != nil {
		for _, t := range s.Types.ToStrings() {
			f.types |= typeBits[t]
		}
	}
	if s.Const != nil {
		if !primitive(*s.Const) {
			return false
		}
		f.hasConst, f.constVal = true, *s.Const
	}
	if s.Enum != nil {
		for _, v := range s.Enum.Values {
			if !primitive(v) {
				return false
			}
		}
		f.enum = s.Enum.Values
	}
	f.format = s.Format
	f.valueRules = f.hasConst || f.enum != nil || f.format != nil
	f.ref = fc.compile(s.Ref)
	f.refOnly = s.Ref != nil && s.DraftVersion < 2019
	return true
}

// objectRules compiles the keywords of objects.
func (fc *fastCompiler) objectRules(f *fastSchema, s *jsonschema.Schema) {
	f.minProps, f.maxProps = intOr(s.MinProperties), intOr(s.MaxProperties)
	f.required = s.Required
	if len(s.Properties) > 0 {
		f.props = make(map[string]*fastSchema, len(s.Properties))
		for name, p := range s.Properties {
			f.props[name] = fc.compile(p)
		}
	}
	f.additional = fc.additional(s.AdditionalProperties)
}

// arrayRules compiles the keywords of arrays, as the schema's draft spells
// them.
func (fc *fastCompiler) arrayRules(f *fastSchema, s *jsonschema.Schema) {
	f.minItems, f.maxItems = intOr(s.MinItems), intOr(s.MaxItems)
	if s.DraftVersion >= 2020 {
		f.prefix = fc.compileAll(s.PrefixItems)
		f.rest = fc.compile(s.Items2020)
		return
	}
	switch items := s.Items.(type) {
	case *jsonschema.Schema:
		f.rest = fc.compile(items)
	case []*jsonschema.Schema:
		f.prefix = fc.compileAll(items)
		f.rest = fc.additional(s.AdditionalItems)
	}
}

// applicators compiles the keywords that apply subschemas to the same
// value: allOf, anyOf, oneOf, not, if, then, else.
func (fc *fastCompiler) applicators(f *fastSchema, s *jsonschema.Schema) {
	f.allOf, f.anyOf, f.oneOf = fc.compileAll(s.AllOf), fc.compileAll(s.AnyOf), fc.compileAll(s.OneOf)
	f.not = fc.compile(s.Not)
	f.ifS, f.thenS, f.elseS = fc.compile(s.If), fc.compile(s.Then), fc.compile(s.Else)
	f.applicators = f.allOf != nil || f.anyOf != nil || f.oneOf != nil || f.not != nil || f.ifS != nil
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
