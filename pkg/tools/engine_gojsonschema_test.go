package tools

import (
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strings"

	"github.com/xeipuuv/gojsonschema"

	"github.com/toolpool/toolpool/pkg/classify"
)

// The engine the design card named, github.com/xeipuuv/gojsonschema, behind
// the same Compiler interface, kept for the comparison in
// docs/decisions.md (engine_test.go, bench_test.go). It lost: it stops at
// draft-07, so it ignores prefixItems and reads a 2020-12 schema as draft-07,
// and it is no faster. To run it in a registry: NewRegistryWith(gojsonschemaCompiler{}).

type gojsonschemaCompiler struct{}

func (gojsonschemaCompiler) Compile(schema json.RawMessage) (Validator, error) {
	l := gojsonschema.NewSchemaLoader()
	// Check the schema against its metaschema, as the other engine does, but
	// only for the drafts it carries: for any other "$schema" (2019-09,
	// 2020-12) it would fetch the metaschema over HTTP.
	l.Validate = !declaresOtherDraft(schema)
	l.Draft = gojsonschema.Draft7
	l.AutoDetect = true
	s, err := l.Compile(gojsonschema.NewBytesLoader(schema))
	if err != nil {
		return nil, err
	}
	return &gojsonschemaValidator{schema: s}, nil
}

// declaresOtherDraft reports whether schema names a "$schema" other than
// draft-04, -06 or -07.
func declaresOtherDraft(schema json.RawMessage) bool {
	var root struct {
		Schema *string `json:"$schema"`
	}
	if json.Unmarshal(schema, &root) != nil || root.Schema == nil {
		return false
	}
	return !strings.HasPrefix(*root.Schema, "http://json-schema.org/draft-0")
}

type gojsonschemaValidator struct{ schema *gojsonschema.Schema }

func (v *gojsonschemaValidator) Validate(input json.RawMessage) []classify.FieldError {
	doc, reason := decodeInput(input) // the same decoding (UseNumber) the engine's own loader does
	if reason != "" {
		return []classify.FieldError{{Path: "", Reason: reason}}
	}
	res, err := v.schema.Validate(gojsonschema.NewRawLoader(doc))
	if err != nil {
		return []classify.FieldError{{Path: "", Reason: "could not be checked against the schema"}}
	}
	if res.Valid() {
		return nil
	}
	var out []classify.FieldError
	for _, e := range res.Errors() {
		tokens := strings.Split(e.Context().String("\x00"), "\x00")[1:] // drop "(root)"
		here := fieldPath(doc, tokens)
		d := e.Details()
		add := func(path, reason string) { out = append(out, classify.FieldError{Path: path, Reason: reason}) }
		switch e.Type() {
		case "required":
			add(joinPath(here, fmt.Sprint(d["property"])), reasonRequired)
		case "additional_property_not_allowed":
			add(joinPath(here, fmt.Sprint(d["property"])), reasonUnknownProperty)
		case "missing_dependency":
			add(here, "requires "+fmt.Sprint(d["dependency"]))
		case "invalid_type":
			want := strings.Split(strings.Trim(fmt.Sprint(d["expected"]), "[]"), ",")
			add(here, reasonType(want, fmt.Sprint(d["given"])))
		case "enum":
			add(here, "must be one of "+fmt.Sprint(d["allowed"]))
		case "const":
			add(here, "must be "+fmt.Sprint(d["allowed"]))
		case "string_gte":
			add(here, reasonMinLength(detailInt(d["min"])))
		case "string_lte":
			add(here, reasonMaxLength(detailInt(d["max"])))
		case "pattern":
			add(here, reasonPattern(d["pattern"].(*regexp.Regexp).String()))
		case "format":
			add(here, reasonFormat(fmt.Sprint(d["format"])))
		case "number_gte":
			add(here, reasonCompare(opMin, detailNumber(d["min"])))
		case "number_gt":
			add(here, reasonCompare(opExclusiveMin, detailNumber(d["min"])))
		case "number_lte":
			add(here, reasonCompare(opMax, detailNumber(d["max"])))
		case "number_lt":
			add(here, reasonCompare(opExclusiveMax, detailNumber(d["max"])))
		case "multiple_of":
			add(here, reasonMultipleOf(detailNumber(d["multiple"])))
		case "array_min_items":
			add(here, reasonMinItems(detailInt(d["min"])))
		case "array_max_items":
			add(here, reasonMaxItems(detailInt(d["max"])))
		case "array_no_additional_items":
			add(here, "has more items than allowed")
		case "unique":
			add(here, reasonUnique(detailInt(d["i"]), detailInt(d["j"])))
		case "array_min_properties":
			add(here, reasonMinProperties(detailInt(d["min"])))
		case "array_max_properties":
			add(here, reasonMaxProperties(detailInt(d["max"])))
		case "false":
			add(here, reasonNotAllowed)
		case "number_any_of":
			add(here, "must match at least one of the allowed forms")
		case "number_one_of":
			add(here, "must match exactly one of the allowed forms")
		case "number_not":
			add(here, `must not match the schema under "not"`)
		case "contains":
			add(here, "must contain at least one matching item")
		case "invalid_property_name":
			add(here, "has a property name that is not allowed: "+fmt.Sprintf("%q", d["property"]))
		case "number_all_of", "condition_then", "condition_else":
			// the failing subschema's own errors are in the list too
		default:
			add(here, e.Description())
		}
	}
	return out
}

func detailInt(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case float64:
		return int(n)
	default:
		var i int
		fmt.Sscan(fmt.Sprint(v), &i)
		return i
	}
}

func detailNumber(v any) string {
	if f, ok := v.(*big.Float); ok {
		return f.Text('g', -1)
	}
	return fmt.Sprint(v)
}
