package tools

import (
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/toolpool/toolpool/pkg/classify"
)

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

// walk adds the field errors of e and of its causes.
func (c *collector) walk(e *jsonschema.ValidationError) {
	loc := e.InstanceLocation
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		c.walkCauses(e)
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
			c.walkCauses(e)
		}
		for _, name := range k.Missing {
			c.addChild(loc, name, reasonDependent(k.Prop))
		}
	case *kind.AdditionalProperties:
		for _, name := range k.Properties {
			c.addChild(loc, name, reasonUnknownProperty)
		}
	case *kind.Type:
		c.add(loc, reasonType(k.Want, k.Got))
		c.fields[len(c.fields)-1].typeWant = k.Want
		c.fields[len(c.fields)-1].typeGot = k.Got
	case *kind.AnyOf:
		c.alternatives(e, "must match at least one of the allowed forms")
	case *kind.OneOf:
		if len(k.Subschemas) > 0 {
			c.add(loc, "must match exactly one of the allowed forms, but matches more than one")
			return
		}
		c.alternatives(e, "must match exactly one of the allowed forms")
	default:
		c.add(loc, ruleReason(e.ErrorKind, c.details))
	}
}

// walkCauses walks each cause of e.
func (c *collector) walkCauses(e *jsonschema.ValidationError) {
	for _, cause := range e.Causes {
		c.walk(cause)
	}
}

// ruleReason writes the reason of a failed rule on one value: a kind of
// error without causes or names to report. details adds the engine's
// detail to a format error.
func ruleReason(k jsonschema.ErrorKind, details bool) string {
	switch k := k.(type) {
	case *kind.FalseSchema:
		return reasonNotAllowed
	case *kind.Enum:
		return reasonEnum(k.Want)
	case *kind.Const:
		return reasonConst(k.Want)
	case *kind.Format:
		reason := reasonFormat(k.Want)
		if details && k.Err != nil {
			reason += " (" + k.Err.Error() + ")"
		}
		return reason
	case *kind.MinLength:
		return reasonMinLength(k.Want)
	case *kind.MaxLength:
		return reasonMaxLength(k.Want)
	case *kind.Pattern:
		return reasonPattern(k.Want)
	case *kind.Minimum:
		return reasonCompare(opMin, ratText(k.Want))
	case *kind.Maximum:
		return reasonCompare(opMax, ratText(k.Want))
	case *kind.ExclusiveMinimum:
		return reasonCompare(opExclusiveMin, ratText(k.Want))
	case *kind.ExclusiveMaximum:
		return reasonCompare(opExclusiveMax, ratText(k.Want))
	case *kind.MultipleOf:
		return reasonMultipleOf(ratText(k.Want))
	case *kind.MinItems:
		return reasonMinItems(k.Want)
	case *kind.MaxItems:
		return reasonMaxItems(k.Want)
	case *kind.AdditionalItems:
		return "has " + count(k.Count, "item", "items") + " more than allowed"
	case *kind.UniqueItems:
		return reasonUnique(k.Duplicates[0], k.Duplicates[1])
	case *kind.MinProperties:
		return reasonMinProperties(k.Want)
	case *kind.MaxProperties:
		return reasonMaxProperties(k.Want)
	case *kind.PropertyNames:
		return "has a property name that is not allowed: " + strconv.Quote(k.Property)
	case *kind.Contains:
		return "must contain at least one matching item"
	case *kind.MinContains:
		return "must contain at least " + count(k.Want, "matching item", "matching items")
	case *kind.MaxContains:
		return "must contain at most " + count(k.Want, "matching item", "matching items")
	case *kind.Not:
		return `must not match the schema under "not"`
	case *kind.ContentEncoding:
		return "must be " + k.Want + "-encoded"
	case *kind.ContentMediaType:
		return "must be valid " + k.Want
	case *kind.ContentSchema:
		return "has content that does not match the schema"
	}
	return "is not valid"
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
