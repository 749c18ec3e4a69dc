package httpapi

import (
	"encoding/json"

	"github.com/toolpool/toolpool/internal/infra/jsonwire"
)

// The decoders of this file read the members and elements of a request
// body that parseTurn has checked (jsonwire.Valid) without checking them
// again: encoding/json checks every value it is handed in full before it
// decodes it, and a body was read four or five times over, its maps and
// values copied each time. Each gives what json.Unmarshal gives for the
// same bytes and target (the same values, an error in the same cases;
// FuzzDecoders holds them together); the values share the body's bytes,
// capped so that an append cannot write into it. Bytes the walk cannot
// read (never a value of a checked body) go to json.Unmarshal, whose error
// is the answer.

// decodeObject is json.Unmarshal(raw, &m) for a map of raw members: nil
// for null, an error for a value that is not an object.
func decodeObject(raw []byte) (map[string]json.RawMessage, error) {
	start, end := jsonwire.Trim(raw)
	v := raw[start:end]
	if isNullValue(v) {
		return nil, nil
	}
	if len(v) > 0 && v[0] == '{' {
		if m, ok := walkObject(v); ok {
			return m, nil
		}
	}
	var m map[string]json.RawMessage
	err := json.Unmarshal(raw, &m)
	return m, err
}

// walkObject reads the members of the object v; ok is false when v cannot
// be walked. As with encoding/json, a repeated name keeps its last value.
func walkObject(v []byte) (_ map[string]json.RawMessage, ok bool) {
	m := map[string]json.RawMessage{}
	i := jsonwire.SkipSpace(v, 1)
	if i < len(v) && v[i] == '}' {
		return m, i == len(v)-1
	}
	for i < len(v) {
		if v[i] != '"' {
			return nil, false
		}
		end, ok := jsonwire.ValidString(v, i)
		if !ok {
			return nil, false
		}
		name, ok := unquote(v[i:end])
		if !ok {
			return nil, false
		}
		if i = jsonwire.SkipSpace(v, end); i >= len(v) || v[i] != ':' {
			return nil, false
		}
		val, next, ok := element(v, jsonwire.SkipSpace(v, i+1))
		if !ok {
			return nil, false
		}
		m[name] = val
		if next < len(v) && v[next] == '}' {
			return m, next == len(v)-1
		}
		if next >= len(v) || v[next] != ',' {
			return nil, false
		}
		i = jsonwire.SkipSpace(v, next+1)
	}
	return nil, false
}

// element reads the value at v[i]: the value, capped, and the index of the
// first byte after it that is not whitespace.
func element(v []byte, i int) (val json.RawMessage, next int, ok bool) {
	end := jsonwire.SkipValue(v, i)
	if end < 0 {
		return nil, 0, false
	}
	return json.RawMessage(v[i:end:end]), jsonwire.SkipSpace(v, end), true
}

// decodeArray is json.Unmarshal(raw, &items) for a slice of raw elements:
// nil for null, an error for a value that is not an array.
func decodeArray(raw []byte) ([]json.RawMessage, error) {
	start, end := jsonwire.Trim(raw)
	v := raw[start:end]
	if isNullValue(v) {
		return nil, nil
	}
	if len(v) > 0 && v[0] == '[' {
		if items, ok := walkArray(v); ok {
			return items, nil
		}
	}
	var items []json.RawMessage
	err := json.Unmarshal(raw, &items)
	return items, err
}

// walkArray reads the elements of the array v; ok is false when v cannot
// be walked.
func walkArray(v []byte) (_ []json.RawMessage, ok bool) {
	items := make([]json.RawMessage, 0, 4)
	i := jsonwire.SkipSpace(v, 1)
	if i < len(v) && v[i] == ']' {
		return items, i == len(v)-1
	}
	for i < len(v) {
		val, next, ok := element(v, i)
		if !ok {
			return nil, false
		}
		items = append(items, val)
		if next < len(v) && v[next] == ']' {
			return items, next == len(v)-1
		}
		if next >= len(v) || v[next] != ',' {
			return nil, false
		}
		i = jsonwire.SkipSpace(v, next+1)
	}
	return nil, false
}

// decodeString is json.Unmarshal(raw, s) for a string: s is unchanged for
// null, and an error is returned for a value that is not a string.
func decodeString(raw []byte, s *string) error {
	start, end := jsonwire.Trim(raw)
	v := raw[start:end]
	if isNullValue(v) {
		return nil
	}
	if len(v) > 0 && v[0] == '"' {
		if end, ok := jsonwire.ValidString(v, 0); ok && end == len(v) {
			if str, ok := unquote(v); ok {
				*s = str
				return nil
			}
		}
	}
	// A string of its own here keeps s on its caller's stack: only this
	// path, never taken for a checked body, lets it escape.
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		return err
	}
	*s = str
	return nil
}

// unquote reads the JSON string q, quotes included, as encoding/json does.
func unquote(q []byte) (string, bool) {
	if len(q) < 2 {
		return "", false
	}
	inner := q[1 : len(q)-1]
	if jsonwire.PlainASCII(inner) || jsonwire.Plain(inner) {
		return wireWord(inner), true
	}
	return jsonwire.Unquote(inner)
}

// wireWord is string(b), without a copy for the member names and types
// that every turn repeats.
func wireWord(b []byte) string {
	switch string(b) {
	case "type":
		return "type"
	case "id":
		return "id"
	case "name":
		return "name"
	case "input":
		return "input"
	case "role":
		return "role"
	case "content":
		return "content"
	case "text":
		return "text"
	case "tool_use":
		return "tool_use"
	case "assistant":
		return "assistant"
	case "tool_calls":
		return "tool_calls"
	case "function":
		return "function"
	case "arguments":
		return "arguments"
	case "call_id":
		return "call_id"
	case "function_call":
		return "function_call"
	case "output":
		return "output"
	}
	return string(b)
}

func isNullValue(v []byte) bool { return string(v) == "null" }
