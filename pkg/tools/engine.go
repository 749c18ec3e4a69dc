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
