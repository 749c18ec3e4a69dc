package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"
)

// One shape per body. A body that holds the calls of two model APIs (an
// Anthropic message whose content has tool_use blocks and OpenAI
// tool_calls beside it; content, parts and output in one object; an array
// of tool_use blocks and function_call items) was read in the first shape
// that claimed it, and the calls of the others were silently left out:
// the agent got fewer answers than it sent calls. Such a body is a 400
// that names what it found, so that the agent's author fixes the request
// rather than the model waiting for answers that never come.

// callMember is a member of an object body that holds the calls of one
// shape.
type callMember struct {
	name  string
	shape shape
	what  string                     // what the member holding calls looks like, for the 400
	holds func(json.RawMessage) bool // whether the member's value holds calls (or could)
}

// callMembers are the members a body's calls are read from, by shape. A
// chat message's content is Anthropic's only when it holds tool_use
// blocks: OpenAI's assistant messages have content too (a string, null or
// text parts) beside their tool_calls.
var callMembers = []callMember{
	{"content", anthropicShape{}, "Anthropic content with tool_use blocks", holdsToolUse},
	{"tool_calls", openAIShape{}, "OpenAI Chat Completions tool_calls", holdsSomething},
	{"output", responsesShape{}, "OpenAI Responses API output", holdsSomething},
	{"parts", geminiShape{}, "Gemini parts", holdsSomething},
	{"candidates", geminiShape{}, "Gemini candidates", holdsSomething},
}

// oneShape looks at the members of an object body that hold calls. Two or
// more of them make the body mixed: a 400 naming them. Exactly one names
// the shape the body is in (a Gemini Content with a text content member
// beside its parts is Gemini's, not a chat message with nothing to run).
// None leaves the body to the shapes' claims (nil, "", nil). It costs a
// few map lookups for a body with one of the members, as every body of a
// model API is.
func oneShape(msg map[string]json.RawMessage) (shape, string, error) {
	present := 0
	for i := range callMembers {
		if _, ok := msg[callMembers[i].name]; ok {
			present++
		}
	}
	if present < 2 {
		return nil, "", nil
	}
	var found [8]*callMember // len(callMembers) at most
	n := 0
	for i := range callMembers {
		m := &callMembers[i]
		if raw, ok := msg[m.name]; ok && m.holds(raw) {
			found[n] = m
			n++
		}
	}
	switch n {
	case 0:
		return nil, "", nil
	case 1:
		return found[0].shape, found[0].what, nil
	}
	names := make([]string, n)
	for i, m := range found[:n] {
		names[i] = `"` + m.name + `" (` + m.what + `)`
	}
	return nil, "", badf("the body mixes formats: it has %s; post the assistant message of one model API per request, in one format, so that every call gets its answer",
		joinAnd(names))
}

// foreignItem is the 400 of an element of a list of self's items (at
// names it; typ is its type member, hasType whether it has one) that is
// another shape's: a bare array or a member mixing two model APIs' items.
// It is asked only of the items self skips, and allocates only for an
// item another shape claims, so the items of a body in one shape cost
// nothing more.
func foreignItem(self shape, fields map[string]json.RawMessage, typ string, hasType bool, i int, at string) error {
	it := arrayItem{fields: fields, typ: typ, hasType: hasType}
	for _, s := range shapes {
		if s == self {
			continue
		}
		what, ok := s.claimItem(it, i)
		if !ok {
			continue
		}
		if _, mine := self.claimItem(it, i); mine {
			return nil // self's own item, as another's could look
		}
		where, _, _ := strings.Cut(at, "[")
		if where == "" {
			where = "the array"
		}
		return badf("the body mixes formats: %s holds %s and %s; post the calls of one model API per request, in one format, so that every call gets its answer",
			where, selfItems[self.format()], what)
	}
	return nil
}

// selfItems names each shape's call items, for foreignItem's 400.
var selfItems = map[Format]string{
	FormatAnthropic: "Anthropic content blocks",
	FormatOpenAI:    "OpenAI Chat Completions tool calls",
	FormatResponses: "OpenAI Responses API items",
	FormatGemini:    "Gemini parts",
}

// holdsToolUse reports whether a content member is an array holding a
// tool_use block.
func holdsToolUse(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' || !bytes.Contains(raw, []byte(`"tool_use"`)) {
		return false
	}
	items, err := decodeArray(raw)
	if err != nil {
		return false
	}
	for _, it := range items {
		fields, err := decodeObject(it)
		if err != nil {
			continue
		}
		var typ string
		if decodeString(fields["type"], &typ) == nil && typ == "tool_use" {
			return true
		}
	}
	return false
}

// holdsSomething reports whether a member is neither null nor an empty
// array or object: a value that is not a list is counted, so that a body
// with a wrong member beside the calls is refused for the mix rather than
// read in part.
func holdsSomething(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return false
	}
	if (raw[0] == '[' || raw[0] == '{') && len(raw) >= 2 {
		inner := bytes.TrimSpace(raw[1 : len(raw)-1])
		return len(inner) > 0
	}
	return true
}

// joinAnd joins names as a sentence does: "a", "a and b", "a, b and c".
func joinAnd(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
