package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolpool/toolpool/internal/front/apikey"
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
	wire   []wireCall         // what the answer to calls[i] names besides calls[i].Name
}

// wireCall is what the answer to one call needs from the request: the id
// to answer it by (for Gemini, "" when the call had none, though the pool
// keys it by a stand-in; see geminiKey) and, for Responses, the output
// item's type.
type wireCall struct {
	id         string
	outputType string
}

// add appends a call; local, when not nil, is its answer.
func (t *turn) add(call envelope.ToolUseBlock, local *envelope.Result, w wireCall) {
	t.calls = append(t.calls, call)
	t.local = append(t.local, local)
	t.wire = append(t.wire, w)
}

// badRequest is a body the handler refuses with 400; its message says what
// is wrong.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func badf(format string, args ...any) error { return &badRequest{msg: fmt.Sprintf(format, args...)} }

const shapeHint = `expected an assistant message: {"role":"assistant","content":[…tool_use blocks…]} (Anthropic Messages), ` +
	`{"role":"assistant","tool_calls":[…]} (OpenAI Chat Completions), a response or its output array of function_call items ` +
	`(OpenAI Responses API), or {"role":"model","parts":[…functionCall parts…]} or a whole response (Gemini)`

// expects says what each format reads, for the 400 of a body of another.
var expects = map[Format]string{
	FormatAnthropic: `an Anthropic Messages assistant message {"role":"assistant","content":[…tool_use blocks…]} or its content array`,
	FormatOpenAI:    `an OpenAI Chat Completions assistant message {"role":"assistant","tool_calls":[…]} or its tool_calls array`,
	FormatResponses: `an OpenAI Responses API response {"object":"response","output":[…]} or its output array of function_call items`,
	FormatGemini:    `a Gemini Content {"role":"model","parts":[…functionCall parts…]}, a whole GenerateContentResponse or the parts array`,
}

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

// MaxToolNameBytes caps a tool name read from a request (and listed by an
// API key).
const MaxToolNameBytes = apikey.MaxToolNameBytes

// parseTurn reads a request body. forced, when not empty, is the format the
// request named in ?format=; otherwise the body's shape decides (see
// shapeOfItems and shapeOfObject; Anthropic when nothing does). A body
// whose shape is clearly another format than forced is refused, naming
// both.
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
		seen, what := shapeOfItems(items)
		format, err := choose(forced, seen, what)
		if err != nil {
			return nil, err
		}
		switch format {
		case FormatOpenAI:
			return parseToolCalls(items, "", maxCalls)
		case FormatResponses:
			return parseOutput(items, "", maxCalls)
		case FormatGemini:
			return parseParts(items, "", "", maxCalls)
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
	seen, what, err := shapeOfObject(msg)
	if err != nil {
		return nil, err
	}
	format, err := choose(forced, seen, what)
	if err != nil {
		return nil, err
	}
	switch format {
	case FormatResponses:
		return parseResponse(msg, maxCalls)
	case FormatGemini:
		return parseGemini(msg, maxCalls)
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
	if forced == "" && !hasCalls && !hasContent {
		return nil, badf("the body has neither \"content\" nor \"tool_calls\"; %s", shapeHint)
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

// choose is the format a body is read in: forced when given (a body that
// is clearly of another format is refused), else what its shape says,
// else Anthropic.
func choose(forced, seen Format, what string) (Format, error) {
	switch {
	case forced == "" && seen == "":
		return FormatAnthropic, nil
	case forced == "":
		return seen, nil
	case seen != "" && seen != forced:
		return "", badf("?format=%s expects %s; the body looks like %s. Drop ?format= to let the body decide, or use ?format=%s",
			forced, expects[forced], what, seen)
	}
	return forced, nil
}

// responsesItemTypes are the types of OpenAI Responses API items (its
// output, and the input items an agent sends back): none is an Anthropic
// content block type. Any other type ending in "_call" or "_call_output"
// is one too.
var responsesItemTypes = map[string]bool{
	"function_call": true, "function_call_output": true, "custom_tool_call": true,
	"custom_tool_call_output": true, "reasoning": true, "message": true,
	"web_search_call": true, "file_search_call": true, "computer_call": true,
	"code_interpreter_call": true, "image_generation_call": true, "local_shell_call": true,
	"mcp_call": true, "mcp_list_tools": true, "mcp_approval_request": true, "mcp_approval_response": true,
	"output_text": true, "input_text": true, "refusal": true, "compaction": true, "item_reference": true,
}

// anthropicBlockTypes are the types of Anthropic content blocks that no
// other format's items have ("text" is not one: OpenAI's content parts
// have it too).
var anthropicBlockTypes = map[string]bool{
	"tool_use": true, "thinking": true, "redacted_thinking": true, "server_tool_use": true,
	"tool_result": true, "image": true, "document": true, "search_result": true, "mcp_tool_use": true,
	"mcp_tool_result": true, "container_upload": true,
}

// geminiPartKeys are the members of a Gemini Part (which has no "type").
var geminiPartKeys = []string{
	"functionCall", "functionResponse", "text", "thought", "thoughtSignature", "inlineData",
	"fileData", "executableCode", "codeExecutionResult", "videoMetadata",
}

func isResponsesType(typ string) bool {
	return responsesItemTypes[typ] || strings.HasSuffix(typ, "_call") || strings.HasSuffix(typ, "_call_output")
}

// shapeOfItems says which format a bare array is in, from its first item
// that tells ("" when none does), and what the item looks like.
func shapeOfItems(items []json.RawMessage) (Format, string) {
	for i, raw := range items {
		var item map[string]json.RawMessage
		if json.Unmarshal(raw, &item) != nil {
			continue
		}
		var typ string
		rawType, hasType := item["type"]
		if hasType {
			_ = json.Unmarshal(rawType, &typ)
		}
		switch {
		case typ == "function" || !hasType && item["function"] != nil:
			return FormatOpenAI, fmt.Sprintf("OpenAI Chat Completions tool calls (a function call at [%d])", i)
		case isResponsesType(typ) || item["call_id"] != nil:
			return FormatResponses, fmt.Sprintf("OpenAI Responses API output (an item of type %q at [%d])", typ, i)
		case anthropicBlockTypes[typ] || strings.HasSuffix(typ, "_tool_result"):
			return FormatAnthropic, fmt.Sprintf("Anthropic content blocks (a %s block at [%d])", typ, i)
		case !hasType && hasAny(item, geminiPartKeys):
			return FormatGemini, fmt.Sprintf("Gemini parts (a part with %s at [%d])", firstOf(item, geminiPartKeys), i)
		}
	}
	return "", ""
}

// shapeOfObject says which format an object is in ("" when it does not
// tell) and what it looks like. A single Responses item or Gemini part is
// refused: the answer to it would not be what the agent appends.
func shapeOfObject(msg map[string]json.RawMessage) (Format, string, error) {
	var typ, object string
	_ = json.Unmarshal(msg["type"], &typ)
	_ = json.Unmarshal(msg["object"], &object)
	_, hasContent := msg["content"]
	switch {
	case msg["tool_calls"] != nil:
		return FormatOpenAI, "an OpenAI Chat Completions assistant message (it has tool_calls)", nil
	case hasContent:
		var items []json.RawMessage
		if json.Unmarshal(msg["content"], &items) == nil {
			if f, _ := shapeOfItems(items); f == FormatAnthropic {
				return f, "an Anthropic Messages assistant message (its content has Anthropic blocks)", nil
			}
		}
		return "", "", nil // a string or empty content: either chat format
	case msg["output"] != nil || object == "response":
		return FormatResponses, "an OpenAI Responses API response (it has output)", nil
	case msg["candidates"] != nil:
		return FormatGemini, "a Gemini GenerateContentResponse (it has candidates)", nil
	case msg["parts"] != nil:
		return FormatGemini, "a Gemini Content (it has parts)", nil
	case msg["choices"] != nil:
		return "", "", badf("the body looks like a whole chat completion; post its choices[0].message")
	case isResponsesType(typ) || msg["call_id"] != nil:
		return "", "", badf("the body looks like one OpenAI Responses API item of type %q; post the response's output array, or the whole response", typ)
	case hasAny(msg, geminiPartKeys):
		return "", "", badf("the body looks like one Gemini part (it has %s); post the Content {\"role\":\"model\",\"parts\":[…]}, or the whole response", firstOf(msg, geminiPartKeys))
	}
	return "", "", nil
}

func hasAny(m map[string]json.RawMessage, keys []string) bool { return firstOf(m, keys) != "" }

func firstOf(m map[string]json.RawMessage, keys []string) string {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return k
		}
	}
	return ""
}

// parseContent reads Anthropic content blocks: tool_use blocks become
// calls, every other block (text, thinking, …) is skipped.
func parseContent(items []json.RawMessage, field string, maxCalls int) (*turn, error) {
	t := &turn{format: FormatAnthropic}
	seen := map[string]string{}
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
		id, err := uniqueID(block, at, "id", "a tool_use block needs the id the model gave it", "tool_use id", seen)
		if err != nil {
			return nil, err
		}
		name, err := toolName(block, at, "a tool_use block needs the name of the tool")
		if err != nil {
			return nil, err
		}
		if len(t.calls) == maxCalls {
			return nil, badf("more than %d tool calls in one request; send them in smaller batches", maxCalls)
		}
		t.add(envelope.ToolUseBlock{Type: "tool_use", ID: id, Name: name, Input: block["input"]}, nil, wireCall{id: id})
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
	seen := map[string]string{}
	for i, raw := range items {
		at := index(field, i)
		call, err := object(raw, at, "a tool call object")
		if err != nil {
			return nil, err
		}
		id, err := uniqueID(call, at, "id", "every tool call needs the id the model gave it", "tool call id", seen)
		if err != nil {
			return nil, err
		}
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
			t.add(envelope.ToolUseBlock{Type: "tool_use", ID: id, Name: name}, localError(id, name, classify.UnsupportedCallTypeMessage(typ)), wireCall{id: id})
			continue
		}
		fn, err := object(call["function"], at+".function", `an object {"name":…,"arguments":…}`)
		if err != nil {
			return nil, err
		}
		name, err := toolName(fn, at+".function", "every function call needs the name of the function")
		if err != nil {
			return nil, err
		}
		t.addFunctionCall(id, name, fn["arguments"], wireCall{id: id})
	}
	return t, nil
}

// addFunctionCall appends an OpenAI function call (Chat Completions or
// Responses) whose arguments are rawArgs; arguments that are not JSON
// answer it here.
func (t *turn) addFunctionCall(id, name string, rawArgs json.RawMessage, w wireCall) {
	input, problem := arguments(rawArgs)
	call := envelope.ToolUseBlock{Type: "tool_use", ID: id, Name: name, Input: input}
	if problem != "" {
		t.add(call, localError(id, name, classify.InvalidArgumentsMessage(name, problem)), w)
		return
	}
	t.add(call, nil, w)
}

// parseResponse reads a whole OpenAI Responses API response: its output
// array.
func parseResponse(msg map[string]json.RawMessage, maxCalls int) (*turn, error) {
	raw, ok := msg["output"]
	if !ok || isNull(raw) {
		return nil, badf("output: missing; %s", expects[FormatResponses])
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, badf("output: must be an array of Responses API items, not a JSON %s", kind(raw))
	}
	return parseOutput(items, "output", maxCalls)
}

// parseOutput reads OpenAI Responses API output items: function_call
// items become calls keyed by their call_id; a custom_tool_call is
// answered here with an error (toolpool runs function tools); every other
// item (message, reasoning, the calls of tools OpenAI runs itself, the
// outputs already given) is skipped. A function_call whose output is in
// the same array was answered before and is skipped too, so that an agent
// may post its whole input list.
func parseOutput(items []json.RawMessage, field string, maxCalls int) (*turn, error) {
	t := &turn{format: FormatResponses}
	parsed := make([]map[string]json.RawMessage, len(items))
	answered := map[string]bool{}
	for i, raw := range items {
		at := index(field, i)
		item, err := object(raw, at, "a Responses API item object")
		if err != nil {
			return nil, err
		}
		typ, err := requiredString(item, at, "type", "every Responses API item needs a type")
		if err != nil {
			return nil, err
		}
		parsed[i] = item
		if typ == "function_call_output" || typ == "custom_tool_call_output" {
			var id string
			_ = json.Unmarshal(item["call_id"], &id)
			answered[id] = true
		}
	}
	seen := map[string]string{}
	for i, item := range parsed {
		at := index(field, i)
		var typ string
		_ = json.Unmarshal(item["type"], &typ)
		if typ != "function_call" && typ != "custom_tool_call" {
			continue
		}
		id, err := uniqueID(item, at, "call_id", "a "+typ+" item needs the call_id the model gave it", "call_id", seen)
		if err != nil {
			return nil, err
		}
		if answered[id] {
			continue
		}
		name, err := toolName(item, at, "a "+typ+" item needs the name of the tool")
		if err != nil {
			return nil, err
		}
		if len(t.calls) == maxCalls {
			return nil, badf("more than %d tool calls in one request; send them in smaller batches", maxCalls)
		}
		if typ == "custom_tool_call" {
			t.add(envelope.ToolUseBlock{Type: "tool_use", ID: id, Name: name},
				localError(id, name, classify.UnsupportedCallTypeMessage("custom")), wireCall{id: id, outputType: "custom_tool_call_output"})
			continue
		}
		args := item["arguments"]
		if c := bytes.TrimSpace(args); len(c) > 0 && c[0] != '"' && c[0] != '{' && !isNull(c) {
			return nil, badf("%s.arguments: must be a JSON object encoded as a string, not a JSON %s", at, kind(c))
		}
		t.addFunctionCall(id, name, args, wireCall{id: id, outputType: "function_call_output"})
	}
	return t, nil
}

// parseGemini reads a Gemini Content {"role":"model","parts":[…]} or a
// whole GenerateContentResponse, whose candidates[0].content is read (a
// candidate without content, as a blocked one is, has nothing to run).
func parseGemini(msg map[string]json.RawMessage, maxCalls int) (*turn, error) {
	field, content := "", msg
	var responseID string
	if raw, ok := msg["candidates"]; ok {
		var candidates []json.RawMessage
		if json.Unmarshal(raw, &candidates) != nil {
			return nil, badf("candidates: must be an array, not a JSON %s", kind(raw))
		}
		if len(candidates) == 0 {
			return nil, badf("candidates: is empty; the response has no candidate to run (its promptFeedback says why)")
		}
		cand, err := object(candidates[0], "candidates[0]", "a candidate object")
		if err != nil {
			return nil, err
		}
		if raw, ok := cand["content"]; !ok || isNull(raw) {
			return &turn{format: FormatGemini}, nil
		}
		if content, err = object(cand["content"], "candidates[0].content", `a Content object {"role":"model","parts":[…]}`); err != nil {
			return nil, err
		}
		field = "candidates[0].content"
		_ = json.Unmarshal(msg["responseId"], &responseID)
	}
	if role, ok := content["role"]; ok && !isNull(role) {
		var r string
		if json.Unmarshal(role, &r) != nil {
			return nil, badf("%s: must be a string, not a JSON %s", dot(field, "role"), kind(role))
		}
		if r != "model" {
			return nil, badf("%s: is %q; post the model's content that asked for the functions", dot(field, "role"), r)
		}
	}
	raw, ok := content["parts"]
	if !ok || isNull(raw) {
		return &turn{format: FormatGemini}, nil // no parts: nothing to run
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return nil, badf("%s: must be an array of parts, not a JSON %s", dot(field, "parts"), kind(raw))
	}
	return parseParts(parts, dot(field, "parts"), responseID, maxCalls)
}

// parseParts reads Gemini parts: functionCall parts become calls, every
// other part (text, thought, …) is skipped. A call without an id is keyed
// by geminiKey; its answer has no id either.
func parseParts(parts []json.RawMessage, field, responseID string, maxCalls int) (*turn, error) {
	t := &turn{format: FormatGemini}
	seen := map[string]string{}
	turnKey := ""
	for i, raw := range parts {
		at := index(field, i)
		part, err := object(raw, at, "a Gemini part object")
		if err != nil {
			return nil, err
		}
		rawCall, ok := part["functionCall"]
		if !ok || isNull(rawCall) {
			continue
		}
		at += ".functionCall"
		call, err := object(rawCall, at, `an object {"name":…,"args":{…}}`)
		if err != nil {
			return nil, err
		}
		name, err := toolName(call, at, "a functionCall needs the name of the function")
		if err != nil {
			return nil, err
		}
		given := ""
		if raw, ok := call["id"]; ok && !isNull(raw) {
			if given, err = requiredString(call, at, "id", "an id, when given, is the one the model gave the call"); err != nil {
				return nil, err
			}
			if problem := checkID(given); problem != "" {
				return nil, badf("%s.id: %s", at, problem)
			}
		}
		key := given
		if key == "" {
			if turnKey == "" {
				turnKey = geminiTurnKey(parts, responseID)
			}
			key = geminiKey(turnKey, i)
		}
		if prev, dup := seen[key]; dup {
			return nil, badf("%s.id: %q is also the id of %s; every functionCall id must be unique", at, key, prev)
		}
		seen[key] = strings.TrimSuffix(at, ".functionCall")
		input := json.RawMessage(`{}`)
		if raw := bytes.TrimSpace(call["args"]); len(raw) > 0 && !isNull(raw) {
			if raw[0] != '{' {
				return nil, badf("%s.args: must be an object, not a JSON %s", at, kind(raw))
			}
			input = raw
		}
		if len(t.calls) == maxCalls {
			return nil, badf("more than %d tool calls in one request; send them in smaller batches", maxCalls)
		}
		t.add(envelope.ToolUseBlock{Type: "tool_use", ID: key, Name: name, Input: input}, nil, wireCall{id: given})
	}
	return t, nil
}

// geminiTurnKey names a turn whose functionCalls have no ids: the
// response's responseId when the body was a whole response (each response
// has its own), else a hash of the parts (their JSON with keys sorted), so
// that the same content posted again (a retry) is the same calls, and
// another turn's content (other text, other thought signatures, other
// arguments) is other calls.
func geminiTurnKey(parts []json.RawMessage, responseID string) string {
	if responseID != "" && len(responseID) <= 128 && checkID(responseID) == "" {
		return responseID
	}
	h := sha256.New()
	for _, p := range parts {
		var v any
		dec := json.NewDecoder(bytes.NewReader(p))
		dec.UseNumber()
		if dec.Decode(&v) == nil {
			canon, _ := json.Marshal(v)
			h.Write(canon)
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// geminiKey is the pool's id of the functionCall without an id at
// position i of the parts of a turn: "gemini:<turn>:<i>".
func geminiKey(turnKey string, i int) string { return "gemini:" + turnKey + ":" + strconv.Itoa(i) }

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
