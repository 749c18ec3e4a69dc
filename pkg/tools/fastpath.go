package tools

import "github.com/santhosh-tekuri/jsonschema/v6"

// The fast check.
//
// The engine validates a three-field input in about 5 µs with 34
// allocations, most of them for math/big arithmetic on every number it
// compares and for per-property bookkeeping. Most calls are valid, and a valid
// input needs no error tree. So the registry compiles, from the engine's own
// compiled schema, a small checker for the keywords tool schemas use, which
// answers valid, invalid or unknown without allocating. Only "valid" is
// trusted: invalid and unknown inputs go to the engine, which writes the
// errors. A schema that uses any keyword outside fastFields gets no fast
// check at all, so the fast check can only be incomplete, never different.
//
// compileFast (fastpath_compile.go) builds a fastSchema from the engine's
// schema. It runs first on the input's JSON text (checkText,
// fastpath_text.go), and on the decoded input (check, fastpath_check.go)
// only when the text alone cannot decide. TestFastCheckAgreesWithEngine and
// FuzzFastCheck hold both to the engine.

// verdict is the fast check's answer on one value.
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
	valueRules          bool // any of const, enum, format is set
	applicators         bool // any of allOf, anyOf, oneOf, not, if is set
}

// boolVerdict is valid for true, invalid for false.
func boolVerdict(ok bool) verdict {
	if ok {
		return verdictValid
	}
	return verdictInvalid
}

// and combines two verdicts on one value: invalid if either is, else
// unknown if either is, else valid.
func (r verdict) and(s verdict) verdict {
	switch {
	case r == verdictInvalid || s == verdictInvalid:
		return verdictInvalid
	case r == verdictUnknown || s == verdictUnknown:
		return verdictUnknown
	}
	return verdictValid
}
