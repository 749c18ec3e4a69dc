package tools

import (
	"cmp"
	"encoding/json"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/toolpool/toolpool/pkg/classify"
)

// This file holds what every schema engine adapter shares: how a location in
// the input is written as a path and how a failed rule is written as a reason.
// Both are read by the model, so they use plain words and a path syntax it
// knows from JavaScript and Python: items[0].name.

// fieldPath writes the JSON-pointer tokens of a location in root as a
// model-readable path: object keys joined by dots, array indices in brackets
// (items[0].name). A key that is not a plain word is quoted in brackets
// (["a b"]). The root is "". Tokens past the end of root (a missing required
// property) are treated as keys.
func fieldPath(root any, tokens []string) string {
	var b strings.Builder
	cur := root
	for _, tok := range tokens {
		if arr, ok := cur.([]any); ok {
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(arr) {
				b.WriteByte('[')
				b.WriteString(tok)
				b.WriteByte(']')
				cur = arr[i]
				continue
			}
		}
		appendKey(&b, tok)
		if obj, ok := cur.(map[string]any); ok {
			cur = obj[tok]
		} else {
			cur = nil
		}
	}
	return b.String()
}

// joinPath appends the object key to the path p.
func joinPath(p, key string) string {
	var b strings.Builder
	b.WriteString(p)
	appendKey(&b, key)
	return b.String()
}

func appendKey(b *strings.Builder, key string) {
	if plainKey(key) {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(key)
		return
	}
	b.WriteByte('[')
	b.WriteString(strconv.Quote(key))
	b.WriteByte(']')
}

// plainKey reports whether key can be written after a dot: letters, digits,
// '_', '-' and '$' only.
func plainKey(key string) bool {
	if key == "" {
		return false
	}
	for _, r := range key {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-' && r != '$' {
			return false
		}
	}
	return true
}

// sortFields puts fields in the stable order the registry promises (by path,
// then by reason) and drops exact duplicates.
func sortFields(fields []classify.FieldError) []classify.FieldError {
	slices.SortFunc(fields, func(a, b classify.FieldError) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Reason, b.Reason))
	})
	return slices.Compact(fields)
}

// Reasons. Each completes the sentence "<path>: …".

const reasonRequired = "is required"

// reasonNotAllowed is the reason for a value the schema forbids outright
// (a false schema: an item past a fixed-length tuple, an unevaluated
// property).
const reasonNotAllowed = "is not allowed"

// reasonUnknownProperty is the reason for a property that
// "additionalProperties": false refuses.
const reasonUnknownProperty = "is not a known property"

// typeNoun is a JSON Schema type name with its article: "a string".
func typeNoun(t string) string {
	switch t {
	case "null":
		return "null"
	case "object", "array", "integer":
		return "an " + t
	default:
		return "a " + t
	}
}

// reasonType says which types were expected and which was found:
// "must be a string, got number", "must be a string or null, got object".
func reasonType(want []string, got string) string {
	nouns := make([]string, len(want))
	for i, w := range want {
		nouns[i] = typeNoun(w)
	}
	var list string
	switch len(nouns) {
	case 0:
		list = "of another type"
	case 1:
		list = nouns[0]
	default:
		list = strings.Join(nouns[:len(nouns)-1], ", ") + " or " + nouns[len(nouns)-1]
	}
	if got == "integer" {
		got = "number" // the model wrote a number; "integer" would read as a different type
	}
	return "must be " + list + ", got " + got
}

// jsonText writes a schema value (an enum member, a const) as JSON.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(b)
}

// reasonEnum lists the allowed values: `must be one of "write", "append"`.
func reasonEnum(values []any) string {
	if len(values) == 1 {
		return "must be " + jsonText(values[0])
	}
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = jsonText(v)
	}
	return "must be one of " + strings.Join(parts, ", ")
}

// reasonConst names the one allowed value: `must be "v1"`.
func reasonConst(v any) string { return "must be " + jsonText(v) }

// count writes n with a noun in singular or plural: "1 character", "3 items".
func count(n int, singular, plural string) string {
	if n == 1 {
		return "1 " + singular
	}
	return strconv.Itoa(n) + " " + plural
}

func reasonMinLength(n int) string {
	return "must be at least " + count(n, "character", "characters") + " long"
}

func reasonMaxLength(n int) string {
	return "must be at most " + count(n, "character", "characters") + " long"
}

// nonBlankPattern is the pattern a schema uses to say "not empty or only
// whitespace"; it gets a reason in words instead of the regular expression.
const nonBlankPattern = `\S`

func reasonPattern(pattern string) string {
	if pattern == nonBlankPattern {
		return "must not be empty or only whitespace"
	}
	return `must match the pattern "` + pattern + `"`
}

func reasonFormat(format string) string { return "must be a valid " + format }

func reasonMinItems(n int) string { return "must have at least " + count(n, "item", "items") }
func reasonMaxItems(n int) string { return "must have at most " + count(n, "item", "items") }
func reasonMinProperties(n int) string {
	return "must have at least " + count(n, "property", "properties")
}
func reasonMaxProperties(n int) string {
	return "must have at most " + count(n, "property", "properties")
}

func reasonUnique(i, j int) string {
	return "must not contain duplicates; items [" + strconv.Itoa(i) + "] and [" + strconv.Itoa(j) + "] are equal"
}

func reasonDependent(prop string) string {
	return "is required when " + strconv.Quote(prop) + " is present"
}

// Comparison operators of the number rules.
const (
	opMin          = ">="
	opMax          = "<="
	opExclusiveMin = ">"
	opExclusiveMax = "<"
)

func reasonCompare(op, bound string) string { return "must be " + op + " " + bound }

func reasonMultipleOf(m string) string { return "must be a multiple of " + m }

// ratText writes a schema bound as a short decimal: 50, 0.5, 1e+21.
func ratText(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
