package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// turn is a parsed POST /v1/tool_calls body: the calls in order, some
// already answered here (an OpenAI call whose arguments are not JSON, or
// whose type is not "function").
type turn struct {
	format Format
	calls  []envelope.ToolUseBlock
	local  []*envelope.Result // local[i] != nil: calls[i] is answered, not dispatched
}

// badRequest is a body the handler refuses with 400; its message says what
// is wrong.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func badf(format string, args ...any) error { return &badRequest{msg: fmt.Sprintf(format, args...)} }

const shapeHint = `expected an assistant message: {"role":"assistant","content":[…tool_use blocks…]} (Anthropic Messages) ` +
	`or {"role":"assistant","tool_calls":[…]} (OpenAI Chat Completions), or its content or tool_calls array alone`

// MaxIDBytes caps a tool call id (an Anthropic tool_use id, an OpenAI tool
// call id) and a session id.
const MaxIDBytes = 256

// checkID refuses an id the pool cannot carry or that no model API makes:
// ids are 1 to MaxIDBytes printable ASCII characters without spaces
// (Anthropic's "toolu_01A09q90qw90lq917835lq9", OpenAI's "call_abc123",
// "fc_…", Gemini's), since they travel in message headers and logs.
func checkID(s string) string {
	if len(s) > MaxIDBytes {
		return fmt.Sprintf("is %d bytes; the limit is %d", len(s), MaxIDBytes)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return fmt.Sprintf("has the character %q at byte %d; an id is printable ASCII without spaces", rune(s[i]), i)
		}
	}
	return ""
}

// MaxToolNameBytes caps a tool name read from a request.
const MaxToolNameBytes = 256

// parseTurn reads a request body. forced, when not empty, is the format the
// request named in ?format=; otherwise the body decides: an object with a
// "tool_calls" member, or an array of {"type":"function",…} objects, is
// OpenAI; an object with "content", or any other array, is Anthropic.
func parseTurn(body []byte, forced Format, maxCalls int) (*turn, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, badf("the body is empty; %s", shapeHint)
	}
	if !json.Valid(body) {
		return nil, badf("the body is not valid JSON: %s", syntaxDetail(body))
	}
	switch body[0] {
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(body, &items); err != nil {
			return nil, badf("the body is not valid JSON: %s", syntaxDetail(body))
		}
		if err := otherAPIItems(items); err != nil {
			return nil, err
		}
		format := forced
		if format == "" {
			format = FormatAnthropic
			if len(items) > 0 && looksLikeToolCalls(items) {
				format = FormatOpenAI
			}
		}
		if format == FormatOpenAI {
			return parseToolCalls(items, "", maxCalls)
		}
		return parseContent(items, "", maxCalls)
	case '{':
	default:
		return nil, badf("the body is a JSON %s; %s", kind(body), shapeHint)
	}

	var msg map[string]json.RawMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, badf("the body is not valid JSON: %s", syntaxDetail(body))
	}
	if err := otherAPIObject(msg); err != nil {
		return nil, err
	}
	if role, ok := msg["role"]; ok && !isNull(role) {
		var r string
		if json.Unmarshal(role, &r) != nil {
			return nil, badf("role: must be a string, not a JSON %s", kind(role))
		}
		if r != "assistant" {
			return nil, badf("role: is %q; post the assistant message that asked for the tools", r)
		}
	}
	rawCalls, hasCalls := msg["tool_calls"]
	rawContent, hasContent := msg["content"]
	format := forced
	if format == "" {
		switch {
		case hasCalls:
			format = FormatOpenAI
		case hasContent:
			format = FormatAnthropic
		case msg["choices"] != nil:
			return nil, badf("the body looks like a whole chat completion; post its choices[0].message")
		default:
			return nil, badf("the body has neither \"content\" nor \"tool_calls\"; %s", shapeHint)
		}
	}
	if format == FormatOpenAI {
		if !hasCalls || isNull(rawCalls) {
			return &turn{format: FormatOpenAI}, nil // a message without tool calls: nothing to run
		}
		var items []json.RawMessage
		if json.Unmarshal(rawCalls, &items) != nil {
			return nil, badf("tool_calls: must be an array, not a JSON %s", kind(rawCalls))
		}
		return parseToolCalls(items, "tool_calls", maxCalls)
	}
	if !hasContent {
		return nil, badf("content: missing; %s", shapeHint)
	}
	switch c := bytes.TrimSpace(rawContent); {
	case isNull(c), c[0] == '"':
		return &turn{format: FormatAnthropic}, nil // text only: nothing to run
	case c[0] != '[':
		return nil, badf("content: must be an array of content blocks, not a JSON %s", kind(c))
	}
	var items []json.RawMessage
	if err := json.Unmarshal(rawContent, &items); err != nil {
		return nil, badf("content: not valid JSON")
	}
	return parseContent(items, "content", maxCalls)
}

// responsesItemTypes are the types of OpenAI Responses API items (its
// output, and the input items an agent sends back): none is an Anthropic
// content block type.
var responsesItemTypes = map[string]bool{
	"function_call": true, "function_call_output": true, "custom_tool_call": true,
	"custom_tool_call_output": true, "reasoning": true, "message": true,
	"web_search_call": true, "file_search_call": true, "computer_call": true,
	"code_interpreter_call": true, "image_generation_call": true, "local_shell_call": true,
	"mcp_call": true, "mcp_list_tools": true, "mcp_approval_request": true,
	"output_text": true, "input_text": true, "refusal": true,
}

const notSupportedYet = "this API does not support it yet; post an Anthropic Messages assistant message " +
	`({"role":"assistant","content":[…tool_use blocks…]}) or an OpenAI Chat Completions one ({"role":"assistant","tool_calls":[…]})`

// otherAPIItems refuses a bare array of OpenAI Responses API items or
// Gemini parts: read as Anthropic content, they would be skipped and the
// turn answered as if the model were done.
func otherAPIItems(items []json.RawMessage) error {
	for i, raw := range items {
		var item struct {
			Type         any             `json:"type"`
			CallID       json.RawMessage `json:"call_id"`
			FunctionCall json.RawMessage `json:"functionCall"`
		}
		if json.Unmarshal(raw, &item) != nil {
			continue
		}
		typ, _ := item.Type.(string)
		switch {
		case responsesItemTypes[typ] || item.CallID != nil:
			return badf("[%d]: an item of type %q looks like OpenAI Responses API output; %s", i, typ, notSupportedYet)
		case item.FunctionCall != nil:
			return badf("[%d]: a part with functionCall looks like Gemini content; %s", i, notSupportedYet)
		}
	}
	return nil
}

// otherAPIObject refuses an object of another API: a whole OpenAI
// Responses API response or one of its items, a Gemini response or
// content.
func otherAPIObject(msg map[string]json.RawMessage) error {
	_, hasContent := msg["content"]
	_, hasCalls := msg["tool_calls"]
	if hasContent || hasCalls {
		return nil
	}
	var typ string
	_ = json.Unmarshal(msg["type"], &typ)
	switch {
	case msg["output"] != nil || msg["object"] != nil && string(bytes.TrimSpace(msg["object"])) == `"response"`:
		return badf("the body looks like an OpenAI Responses API response; %s", notSupportedYet)
	case responsesItemTypes[typ] || msg["call_id"] != nil:
		return badf("the body looks like an OpenAI Responses API item of type %q; %s", typ, notSupportedYet)
	case msg["candidates"] != nil || msg["parts"] != nil:
		return badf("the body looks like Gemini content; %s", notSupportedYet)
	}
	return nil
}

// looksLikeToolCalls reports whether a bare array is OpenAI tool calls:
// its first element has "type": "function" or a "function" member.
func looksLikeToolCalls(items []json.RawMessage) bool {
	var first struct {
		Type     any             `json:"type"`
		Function json.RawMessage `json:"function"`
	}
	if json.Unmarshal(items[0], &first) != nil {
		return false
	}
	return first.Type == "function" || (first.Type == nil && first.Function != nil)
}

// parseContent reads Anthropic content blocks: tool_use blocks become
// calls, every other block (text, thinking, …) is skipped.
func parseContent(items []json.RawMessage, field string, maxCalls int) (*turn, error) {
	t := &turn{format: FormatAnthropic}
	seen := map[string]int{}
	for i, raw := range items {
		at := index(field, i)
		block, err := object(raw, at, "a content block object")
		if err != nil {
			return nil, err
		}
		typ, err := requiredString(block, at, "type", "every content block needs a type")
		if err != nil {
			return nil, err
		}
		if typ != "tool_use" {
			continue
		}
		id, err := requiredString(block, at, "id", "a tool_use block needs the id the model gave it")
		if err != nil {
			return nil, err
		}
		if problem := checkID(id); problem != "" {
			return nil, badf("%s.id: %s", at, problem)
		}
		if prev, dup := seen[id]; dup {
			return nil, badf("%s.id: %q is also the id of %s; every tool_use id must be unique", at, id, index(field, prev))
		}
		seen[id] = i
		name, err := requiredString(block, at, "name", "a tool_use block needs the name of the tool")
		if err != nil {
			return nil, err
		}
		if len(name) > MaxToolNameBytes {
			return nil, badf("%s.name: is %d bytes; the limit is %d", at, len(name), MaxToolNameBytes)
		}
		if len(t.calls) == maxCalls {
			return nil, badf("more than %d tool calls in one request; send them in smaller batches", maxCalls)
		}
		t.calls = append(t.calls, envelope.ToolUseBlock{Type: "tool_use", ID: id, Name: name, Input: block["input"]})
		t.local = append(t.local, nil)
	}
	return t, nil
}

// parseToolCalls reads OpenAI tool calls. A call whose arguments are not
// JSON, or whose type is not "function", is answered here with an error
// the model can act on; it is not dispatched.
func parseToolCalls(items []json.RawMessage, field string, maxCalls int) (*turn, error) {
	if len(items) > maxCalls {
		return nil, badf("more than %d tool calls in one request; send them in smaller batches", maxCalls)
	}
	t := &turn{format: FormatOpenAI}
	seen := map[string]int{}
	for i, raw := range items {
		at := index(field, i)
		call, err := object(raw, at, "a tool call object")
		if err != nil {
			return nil, err
		}
		id, err := requiredString(call, at, "id", "every tool call needs the id the model gave it")
		if err != nil {
			return nil, err
		}
		if problem := checkID(id); problem != "" {
			return nil, badf("%s.id: %s", at, problem)
		}
		if prev, dup := seen[id]; dup {
			return nil, badf("%s.id: %q is also the id of %s; every tool call id must be unique", at, id, index(field, prev))
		}
		seen[id] = i
		typ := "function"
		if raw, ok := call["type"]; ok && !isNull(raw) {
			if json.Unmarshal(raw, &typ) != nil {
				return nil, badf("%s.type: must be a string, not a JSON %s", at, kind(raw))
			}
		}
		if typ != "function" {
			name := ""
			if c, err := object(call[typ], at+"."+typ, "an object"); err == nil {
				_ = json.Unmarshal(c["name"], &name)
			}
			if len(name) > MaxToolNameBytes {
				name = name[:MaxToolNameBytes]
			}
			t.calls = append(t.calls, envelope.ToolUseBlock{Type: "tool_use", ID: id, Name: name})
			t.local = append(t.local, localError(id, name, classify.UnsupportedCallTypeMessage(typ)))
			continue
		}
		fn, err := object(call["function"], at+".function", `an object {"name":…,"arguments":…}`)
		if err != nil {
			return nil, err
		}
		name, err := requiredString(fn, at+".function", "name", "every function call needs the name of the function")
		if err != nil {
			return nil, err
		}
		if len(name) > MaxToolNameBytes {
			return nil, badf("%s.function.name: is %d bytes; the limit is %d", at, len(name), MaxToolNameBytes)
		}
		input, problem := arguments(fn["arguments"])
		t.calls = append(t.calls, envelope.ToolUseBlock{Type: "tool_use", ID: id, Name: name, Input: input})
		if problem != "" {
			t.local = append(t.local, localError(id, name, classify.InvalidArgumentsMessage(name, problem)))
			continue
		}
		t.local = append(t.local, nil)
	}
	return t, nil
}

// arguments turns an OpenAI function call's arguments (a JSON object
// encoded as a string; an object given directly is accepted too) into the
// call's input. problem, when not empty, says why the arguments are not
// JSON. Missing, null or blank arguments are {}. Valid JSON that is not an
// object is passed on: the dispatcher answers it with a validation error.
func arguments(raw json.RawMessage) (input json.RawMessage, problem string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return json.RawMessage(`{}`), ""
	}
	text := []byte(raw)
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, "the arguments string is not a valid JSON string"
		}
		text = bytes.TrimSpace([]byte(s))
		if len(text) == 0 {
			return json.RawMessage(`{}`), ""
		}
	}
	if !json.Valid(text) {
		return nil, syntaxDetail(text)
	}
	return json.RawMessage(text), ""
}

// localError is an is_error result the handler writes itself.
func localError(id, tool, text string) *envelope.Result {
	return &envelope.Result{
		V:       envelope.Version,
		CallID:  id,
		Tool:    tool,
		Content: envelope.Text(text),
		IsError: true,
		Class:   envelope.ClassValidation,
		Code:    classify.CodeInvalidArgument,
	}
}

// object decodes raw as a JSON object; at and what name it in the error.
func object(raw json.RawMessage, at, what string) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, badf("%s: missing; it must be %s", at, what)
	}
	if raw[0] != '{' {
		return nil, badf("%s: must be %s, not a JSON %s", at, what, kind(raw))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, badf("%s: must be %s", at, what)
	}
	return m, nil
}

// requiredString returns the non-empty string member key of m.
func requiredString(m map[string]json.RawMessage, at, key, why string) (string, error) {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		return "", badf("%s: missing; %s", dot(at, key), why)
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
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
