package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// FormatResponses: the request is an OpenAI Responses API response, or
// its output array; its function_call items run. The answer is a JSON
// array of function_call_output items, one per call, keyed by call_id.
const FormatResponses Format = "responses"

// FunctionCallOutput is one element of the answer to a Responses request:
// an input item for the next responses.create. Type is
// "function_call_output" (or "custom_tool_call_output" for a
// custom_tool_call, which is answered with an error); Output is the
// result's text, starting with ErrorPrefix for an error.
type FunctionCallOutput struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output string `json:"output"`
}

// ResponsesTool is one element of the answer to GET
// /v1/tools?format=responses: a function tool in the format of the
// Responses API "tools" parameter. Strict is false: the pool's schemas
// have optional properties, which strict mode refuses, and the workers
// validate the input themselves.
type ResponsesTool struct {
	Type        string          `json:"type"` // "function"
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

// responsesShape is the OpenAI Responses API: function_call items in,
// function_call_output items out.
type responsesShape struct{}

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

func isResponsesType(typ string) bool {
	return responsesItemTypes[typ] || strings.HasSuffix(typ, "_call") || strings.HasSuffix(typ, "_call_output")
}

func (responsesShape) format() Format { return FormatResponses }

func (responsesShape) expects() string {
	return `an OpenAI Responses API response {"object":"response","output":[…]} or its output array of function_call items`
}

func (responsesShape) claimItem(it arrayItem, i int) (string, bool) {
	if isResponsesType(it.typ) || it.fields["call_id"] != nil {
		return fmt.Sprintf("OpenAI Responses API output (an item of type %q at [%d])", it.typ, i), true
	}
	return "", false
}

// claimObject: a response has output, or says it is one. A body with
// content is a chat message (a response has none): the chat shapes
// decide it.
func (responsesShape) claimObject(msg map[string]json.RawMessage) (string, claim) {
	if _, hasContent := msg["content"]; hasContent {
		return "", notMine
	}
	if msg["output"] != nil || stringMember(msg, "object") == "response" {
		return "an OpenAI Responses API response (it has output)", mine
	}
	return "", notMine
}

// refuseObject: a single item is not the response to answer.
func (responsesShape) refuseObject(msg map[string]json.RawMessage) error {
	if typ := stringMember(msg, "type"); isResponsesType(typ) || msg["call_id"] != nil {
		return badf("the body looks like one OpenAI Responses API item of type %q; post the response's output array, or the whole response", typ)
	}
	return nil
}

func (responsesShape) parseArray(items []json.RawMessage, maxCalls int) (*turn, error) {
	return parseOutput(items, "", maxCalls)
}

// parseObject reads a whole OpenAI Responses API response: its output
// array.
func (responsesShape) parseObject(msg map[string]json.RawMessage, _ bool, maxCalls int) (*turn, error) {
	raw, ok := msg["output"]
	if !ok || isNull(raw) {
		return nil, badf("output: missing; %s", responsesShape{}.expects())
	}
	items, err := decodeArray(raw)
	if err != nil {
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
	t := newTurn(responsesShape{}, min(len(items), maxCalls))
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
			_ = decodeString(item["call_id"], &id)
			answered[id] = true
		}
	}
	seen := map[string]string{}
	for i, item := range parsed {
		at := index(field, i)
		var typ string
		_ = decodeString(item["type"], &typ)
		if typ != "function_call" && typ != "custom_tool_call" {
			if err := foreignItem(responsesShape{}, item, typ, true, i, at); err != nil {
				return nil, err
			}
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
			return nil, errTooManyCalls(maxCalls)
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

// answer is one function_call_output item per call, keyed by its
// call_id, its output the result's text prefixed with ErrorPrefix for an
// error, as in tool messages.
func (responsesShape) answer(t *turn, results []envelope.Result) any {
	out := make([]FunctionCallOutput, len(results))
	for i := range results {
		out[i] = FunctionCallOutput{Type: t.wire[i].outputType, CallID: t.wire[i].id, Output: flaggedText(&results[i], "function_call_output items")}
	}
	return out
}

func (responsesShape) toolList(defs []tools.Definition) any {
	out := make([]ResponsesTool, len(defs))
	for i, d := range defs {
		out[i] = ResponsesTool{Type: "function", Name: d.Name, Description: d.Description, Parameters: d.InputSchema}
	}
	return out
}
