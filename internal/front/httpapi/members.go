package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The helpers of this file read the members of a request body's JSON;
// their errors are 400s that name the member ("tool_calls[2].function.name").

// object decodes raw as a JSON object; at and what name it in the error.
func object(raw json.RawMessage, at, what string) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, badf("%s: missing; it must be %s", at, what)
	}
	if raw[0] != '{' {
		return nil, badf("%s: must be %s, not a JSON %s", at, what, kind(raw))
	}
	m, err := decodeObject(raw)
	if err != nil {
		return nil, badf("%s: must be %s", at, what)
	}
	return m, nil
}

// uniqueID returns the id member key of m: present, a valid id (checkID)
// and not the id of an earlier call; seen maps the ids read so far to
// where they were, what names the kind of id in the error.
func uniqueID(m map[string]json.RawMessage, at, key, why, what string, seen map[string]string) (string, error) {
	id, err := requiredString(m, at, key, why)
	if err != nil {
		return "", err
	}
	if problem := checkID(id); problem != "" {
		return "", badf("%s: %s", dot(at, key), problem)
	}
	if prev, dup := seen[id]; dup {
		return "", badf("%s: %q is also the %s of %s; every %s must be unique", dot(at, key), id, key, prev, what)
	}
	seen[id] = at
	return id, nil
}

// toolName returns the name member of m: present and at most
// MaxToolNameBytes.
func toolName(m map[string]json.RawMessage, at, why string) (string, error) {
	name, err := requiredString(m, at, "name", why)
	if err != nil {
		return "", err
	}
	if len(name) > MaxToolNameBytes {
		return "", badf("%s.name: is %d bytes; the limit is %d", at, len(name), MaxToolNameBytes)
	}
	return name, nil
}

// requiredString returns the non-empty string member key of m.
func requiredString(m map[string]json.RawMessage, at, key, why string) (string, error) {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		return "", badf("%s: missing; %s", dot(at, key), why)
	}
	var s string
	if decodeString(raw, &s) != nil {
		return "", badf("%s: must be a string, not a JSON %s", dot(at, key), kind(raw))
	}
	if strings.TrimSpace(s) == "" {
		return "", badf("%s: is empty; %s", dot(at, key), why)
	}
	return s, nil
}

func index(field string, i int) string { return field + "[" + strconv.Itoa(i) + "]" }

func dot(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// kind names the JSON type of a valid value.
func kind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// syntaxDetail says where data stops being JSON.
func syntaxDetail(data []byte) string {
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	case err != nil:
		return err.Error()
	}
	return "unexpected data"
}

// stringMember is the string member key of m, "" when absent or not a
// string.
func stringMember(m map[string]json.RawMessage, key string) string {
	var s string
	_ = decodeString(m[key], &s)
	return s
}

func hasAny(m map[string]json.RawMessage, keys []string) bool { return firstOf(m, keys) != "" }

// firstOf is the first of keys that m has, "" when none.
func firstOf(m map[string]json.RawMessage, keys []string) string {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return k
		}
	}
	return ""
}
