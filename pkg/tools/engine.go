package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/toolpool/toolpool/pkg/classify"
)

// DefaultCompiler returns the schema engine NewRegistry uses:
// github.com/santhosh-tekuri/jsonschema/v6. Schemas without "$schema" are
// read as draft 2020-12 (what MCP tool schemas use); a schema that names an
// older draft in "$schema" (draft-04, -06, -07, 2019-09) is read as that
// draft. "format" is asserted (an invalid "date-time" is an error, not an
// annotation). References outside the schema document ("$ref" to a URL or a
// file) are refused at registration: a tool schema must be self-contained.
//
// Validation runs a fast check compiled from the schema on the input's JSON
// text, without decoding it. Only when that cannot prove the input valid is
// the input decoded (encoding/json with UseNumber, so integers stay exact)
// and checked again, and the engine runs only when the fast check still
// cannot prove it valid, so every error the model reads was found by the
// engine. See docs/decisions.md.
func DefaultCompiler() Compiler { return jsonschemaCompiler{} }

// schemaURL is the location the compiled schema is known by. It shows in
// compile errors, which go to the operator registering the tool.
const schemaURL = "toolpool:///input_schema.json"

// jsonschemaCompiler compiles with github.com/santhosh-tekuri/jsonschema/v6.
type jsonschemaCompiler struct{}

// Compile implements Compiler.
func (jsonschemaCompiler) Compile(schema json.RawMessage) (Validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, describeSchemaError(err, doc)
	}
	return &jsonschemaValidator{schema: sch, fast: compileFast(sch)}, nil
}

// describeSchemaError rewrites the metaschema's verdict on a schema as one
// line of "path: reason" pairs, like input errors; other compile errors are
// returned as they are.
func describeSchemaError(err error, doc any) error {
	var sve *jsonschema.SchemaValidationError
	if !errors.As(err, &sve) {
		return err
	}
	var verr *jsonschema.ValidationError
	if !errors.As(sve.Err, &verr) {
		return err
	}
	c := collector{root: doc, details: true}
	c.walk(verr)
	fields := make([]classify.FieldError, len(c.fields))
	for i, f := range c.fields {
		fields[i] = f.FieldError
	}
	fields = sortFields(fields)
	parts := make([]string, len(fields))
	for i, f := range fields {
		p := f.Path
		if p == "" {
			p = "(schema)"
		}
		parts[i] = p + ": " + f.Reason
	}
	return &schemaError{msg: "not a valid JSON Schema: " + strings.Join(parts, "; "), err: err}
}

// schemaError is a schema the metaschema refused, described for the
// operator; it wraps the engine's error.
type schemaError struct {
	msg string
	err error
}

func (e *schemaError) Error() string { return e.msg }
func (e *schemaError) Unwrap() error { return e.err }

// refuseLoader refuses every external reference. The metaschemas of the
// drafts are built into the engine and need no loader.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("reference to %s: a tool schema must not refer to other documents", url)
}

// jsonschemaValidator validates with a compiled schema. It is safe for
// concurrent use: neither the schema nor the fast check is written after
// compilation.
type jsonschemaValidator struct {
	schema *jsonschema.Schema
	fast   *fastSchema // nil when the schema uses a keyword the fast check does not know
}

// Validate implements Validator.
func (v *jsonschemaValidator) Validate(input json.RawMessage) []classify.FieldError {
	fast := verdictUnknown
	if v.fast != nil {
		if fast = v.fast.checkText(input); fast == verdictValid {
			return nil // the common case: no decoding, no allocation
		}
	}
	doc, reason := decodeInput(input)
	if reason != "" {
		return []classify.FieldError{{Path: "", Reason: reason}}
	}
	// The decoded check decides some inputs the text check cannot (escaped
	// strings, repeated keys); where the text check decided, it agrees.
	if fast == verdictUnknown && v.fast != nil && v.fast.check(doc) == verdictValid {
		return nil
	}
	err := v.schema.Validate(doc)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []classify.FieldError{{Path: "", Reason: "could not be checked against the schema"}}
	}
	c := collector{root: doc}
	c.walk(verr)
	if len(c.fields) == 0 {
		return []classify.FieldError{{Path: "", Reason: "does not match the schema"}}
	}
	out := make([]classify.FieldError, len(c.fields))
	for i, f := range c.fields {
		out[i] = f.FieldError
	}
	return out
}

// decodeInput decodes a tool's input as the engine wants it: numbers as
// json.Number. reason is set when input is not one JSON value.
func decodeInput(input []byte) (v any, reason string) {
	d := json.NewDecoder(bytes.NewReader(input))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, "is empty; expected a JSON object"
		}
		return nil, "is not valid JSON: " + jsonErrorText(err)
	}
	if rest := input[d.InputOffset():]; len(bytes.TrimSpace(rest)) > 0 {
		return nil, "is not valid JSON: unexpected data after the top-level value at byte " +
			strconv.FormatInt(d.InputOffset(), 10)
	}
	return v, ""
}

// jsonErrorText describes a decoding error without Go type names.
func jsonErrorText(err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return syn.Error() + " at byte " + strconv.FormatInt(syn.Offset, 10)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of JSON input"
	}
	return err.Error()
}

// fieldErr is a FieldError with what an anyOf summary needs to know.
type fieldErr struct {
	classify.FieldError
	typeWant []string // set for a type error
	typeGot  string
}

// collector turns the engine's error tree into field errors.
type collector struct {
	root    any
	fields  []fieldErr
	details bool // add the engine's detail to format errors (for schema errors)
}

func (c *collector) add(loc []string, reason string) {
	c.fields = append(c.fields, fieldErr{FieldError: classify.FieldError{Path: fieldPath(c.root, loc), Reason: reason}})
}

// addChild reports a reason at the property name of the object at loc.
func (c *collector) addChild(loc []string, name, reason string) {
	p := joinPath(fieldPath(c.root, loc), name)
	c.fields = append(c.fields, fieldErr{FieldError: classify.FieldError{Path: p, Reason: reason}})
}

func (c *collector) walk(e *jsonschema.ValidationError) {
	loc := e.InstanceLocation
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		for _, cause := range e.Causes {
			c.walk(cause)
		}
	case *kind.Required:
		for _, name := range k.Missing {
			c.addChild(loc, name, reasonRequired)
		}
	case *kind.DependentRequired:
		for _, name := range k.Missing {
			c.addChild(loc, name, reasonDependent(k.Prop))
		}
	case *kind.Dependency:
		if len(k.Missing) == 0 { // the dependency is a schema: its causes say what is wrong
			for _, cause := range e.Causes {
				c.walk(cause)
			}
		}
		for _, name := range k.Missing {
			c.addChild(loc, name, reasonDependent(k.Prop))
		}
	case *kind.AdditionalProperties:
		for _, name := range k.Properties {
			c.addChild(loc, name, reasonUnknownProperty)
		}
	case *kind.FalseSchema:
		c.add(loc, reasonNotAllowed)
	case *kind.Type:
		c.add(loc, reasonType(k.Want, k.Got))
		c.fields[len(c.fields)-1].typeWant = k.Want
		c.fields[len(c.fields)-1].typeGot = k.Got
	case *kind.Enum:
		c.add(loc, reasonEnum(k.Want))
	case *kind.Const:
		c.add(loc, reasonConst(k.Want))
	case *kind.Format:
		reason := reasonFormat(k.Want)
		if c.details && k.Err != nil {
			reason += " (" + k.Err.Error() + ")"
		}
		c.add(loc, reason)
	case *kind.MinLength:
		c.add(loc, reasonMinLength(k.Want))
	case *kind.MaxLength:
		c.add(loc, reasonMaxLength(k.Want))
	case *kind.Pattern:
		c.add(loc, reasonPattern(k.Want))
	case *kind.Minimum:
		c.add(loc, reasonCompare(opMin, ratText(k.Want)))
	case *kind.Maximum:
		c.add(loc, reasonCompare(opMax, ratText(k.Want)))
	case *kind.ExclusiveMinimum:
		c.add(loc, reasonCompare(opExclusiveMin, ratText(k.Want)))
	case *kind.ExclusiveMaximum:
		c.add(loc, reasonCompare(opExclusiveMax, ratText(k.Want)))
	case *kind.MultipleOf:
		c.add(loc, reasonMultipleOf(ratText(k.Want)))
	case *kind.MinItems:
		c.add(loc, reasonMinItems(k.Want))
	case *kind.MaxItems:
		c.add(loc, reasonMaxItems(k.Want))
	case *kind.AdditionalItems:
		c.add(loc, "has "+count(k.Count, "item", "items")+" more than allowed")
	case *kind.UniqueItems:
		c.add(loc, reasonUnique(k.Duplicates[0], k.Duplicates[1]))
	case *kind.MinProperties:
		c.add(loc, reasonMinProperties(k.Want))
	case *kind.MaxProperties:
		c.add(loc, reasonMaxProperties(k.Want))
	case *kind.PropertyNames:
		c.add(loc, "has a property name that is not allowed: "+strconv.Quote(k.Property))
	case *kind.Contains:
		c.add(loc, "must contain at least one matching item")
	case *kind.MinContains:
		c.add(loc, "must contain at least "+count(k.Want, "matching item", "matching items"))
	case *kind.MaxContains:
		c.add(loc, "must contain at most "+count(k.Want, "matching item", "matching items"))
	case *kind.Not:
		c.add(loc, `must not match the schema under "not"`)
	case *kind.AnyOf:
		c.alternatives(e, "must match at least one of the allowed forms")
	case *kind.OneOf:
		if len(k.Subschemas) > 0 {
			c.add(loc, "must match exactly one of the allowed forms, but matches more than one")
			return
		}
		c.alternatives(e, "must match exactly one of the allowed forms")
	case *kind.ContentEncoding:
		c.add(loc, "must be "+k.Want+"-encoded")
	case *kind.ContentMediaType:
		c.add(loc, "must be valid "+k.Want)
	case *kind.ContentSchema:
		c.add(loc, "has content that does not match the schema")
	default:
		c.add(loc, "is not valid")
	}
}

// alternatives reports an anyOf or oneOf that no alternative matched. When
// every alternative failed only on its type at this location, the reason
// merges them ("must be a string or null, got number"); otherwise it says
// what each alternative wanted.
func (c *collector) alternatives(e *jsonschema.ValidationError, lead string) {
	here := fieldPath(c.root, e.InstanceLocation)
	var (
		alts      []string
		types     []string
		got       string
		onlyTypes = true
	)
	for _, cause := range e.Causes {
		sub := collector{root: c.root, details: c.details}
		sub.walk(cause)
		if len(sub.fields) != 1 || sub.fields[0].typeWant == nil || sub.fields[0].Path != here {
			onlyTypes = false
		} else {
			types = append(types, sub.fields[0].typeWant...)
			got = sub.fields[0].typeGot
		}
		fields := make([]classify.FieldError, len(sub.fields))
		for i, f := range sub.fields {
			fields[i] = f.FieldError
		}
		fields = sortFields(fields)
		parts := make([]string, len(fields))
		for i, f := range fields {
			rel := strings.TrimPrefix(strings.TrimPrefix(f.Path, here), ".")
			if rel == "" {
				parts[i] = f.Reason
			} else {
				parts[i] = rel + ": " + f.Reason
			}
		}
		alts = append(alts, strings.Join(parts, ", "))
	}
	if onlyTypes && len(types) > 0 {
		c.fields = append(c.fields, fieldErr{FieldError: classify.FieldError{Path: here, Reason: reasonType(types, got)}})
		return
	}
	reason := lead
	if len(alts) > 0 {
		reason += " (" + strings.Join(alts, "; or ") + ")"
	}
	c.fields = append(c.fields, fieldErr{FieldError: classify.FieldError{Path: here, Reason: reason}})
}
