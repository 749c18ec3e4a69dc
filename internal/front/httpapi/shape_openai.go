package httpapi

import (
	"encoding/json"
	"fmt"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// FormatOpenAI: the request is an OpenAI Chat Completions assistant
// message with tool_calls, or the tool_calls array; the answer is a JSON
// array of "tool" messages, one per call.
const FormatOpenAI Format = "openai"

// ToolMessage is one element of the answer to an OpenAI request. The
// content of an error starts with ErrorPrefix.
type ToolMessage struct {
	Role       string `json:"role"` // "tool"
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
}

// ToolCall is one element of an OpenAI assistant message's tool_calls.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function an OpenAI tool call names; Arguments is a
// JSON object encoded as a string.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// OpenAITool is one element of the answer to GET /v1/tools?format=openai:
// a tool in the format of the Chat Completions "tools" parameter.
type OpenAITool struct {
	Type     string         `json:"type"` // "function"
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction describes a function tool; Parameters is the tool's input
// JSON Schema.
type OpenAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// openAIShape is the OpenAI Chat Completions API: tool_calls in, tool
// messages out.
type openAIShape struct{}

func (openAIShape) format() Format { return FormatOpenAI }

func (openAIShape) expects() string {
	return `an OpenAI Chat Completions assistant message {"role":"assistant","tool_calls":[…]} or its tool_calls array`
}

func (openAIShape) claimItem(it arrayItem, i int) (string, bool) {
	if it.typ == "function" || !it.hasType && it.fields["function"] != nil {
		return fmt.Sprintf("OpenAI Chat Completions tool calls (a function call at [%d])", i), true
	}
	return "", false
}

func (openAIShape) claimObject(msg map[string]json.RawMessage) (string, claim) {
	if msg["tool_calls"] != nil {
		return "an OpenAI Chat Completions assistant message (it has tool_calls)", mine
	}
	return "", notMine
}

// refuseObject: a whole chat completion is not the message to answer.
func (openAIShape) refuseObject(msg map[string]json.RawMessage) error {
	if msg["choices"] != nil {
		return badf("the body looks like a whole chat completion; post its choices[0].message")
	}
	return nil
}

func (openAIShape) parseArray(items []json.RawMessage, maxCalls int) (*turn, error) {
	return parseToolCalls(items, "", maxCalls)
}

// parseObject reads an assistant message: its tool_calls (a message
// without any has nothing to run).
func (openAIShape) parseObject(msg map[string]json.RawMessage, forced bool, maxCalls int) (*turn, error) {
	if err := checkAssistant(msg, forced); err != nil {
		return nil, err
	}
	rawCalls, hasCalls := msg["tool_calls"]
	if !hasCalls || isNull(rawCalls) {
		return &turn{shape: openAIShape{}}, nil // a message without tool calls: nothing to run
	}
	items, err := decodeArray(rawCalls)
	if err != nil {
		return nil, badf("tool_calls: must be an array, not a JSON %s", kind(rawCalls))
	}
	return parseToolCalls(items, "tool_calls", maxCalls)
}

// parseToolCalls reads OpenAI tool calls. A call whose arguments are not
// JSON, or whose type is not "function", is answered here with an error
// the model can act on; it is not dispatched.
func parseToolCalls(items []json.RawMessage, field string, maxCalls int) (*turn, error) {
	if len(items) > maxCalls {
		return nil, errTooManyCalls(maxCalls)
	}
	t := newTurn(openAIShape{}, min(len(items), maxCalls))
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
			if decodeString(raw, &typ) != nil {
				return nil, badf("%s.type: must be a string, not a JSON %s", at, kind(raw))
			}
		}
		if typ != "function" {
			if err := foreignItem(openAIShape{}, call, typ, call["type"] != nil, i, at); err != nil {
				return nil, err
			}
			t.addUnsupported(call, at, id, typ)
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

// addUnsupported appends a tool call of a type other than "function"
// (call[typ] describes it), answered here with an error.
func (t *turn) addUnsupported(call map[string]json.RawMessage, at, id, typ string) {
	name := ""
	if c, err := object(call[typ], at+"."+typ, "an object"); err == nil {
		_ = decodeString(c["name"], &name)
	}
	if len(name) > MaxToolNameBytes {
		name = name[:MaxToolNameBytes]
	}
	t.add(envelope.ToolUseBlock{Type: "tool_use", ID: id, Name: name}, localError(id, name, classify.UnsupportedCallTypeMessage(typ)), wireCall{id: id})
}

// answer is one tool message per call, its content the result's text
// (other blocks are named, not carried: tool messages hold text),
// prefixed with ErrorPrefix for an error.
func (openAIShape) answer(t *turn, results []envelope.Result) any {
	out := make([]ToolMessage, len(results))
	for i := range results {
		out[i] = ToolMessage{Role: "tool", ToolCallID: t.calls[i].ID, Content: flaggedText(&results[i], "OpenAI tool messages")}
	}
	return out
}

func (openAIShape) toolList(defs []tools.Definition) any {
	out := make([]OpenAITool, len(defs))
	for i, d := range defs {
		out[i] = OpenAITool{Type: "function", Function: OpenAIFunction{Name: d.Name, Description: d.Description, Parameters: d.InputSchema}}
	}
	return out
}
