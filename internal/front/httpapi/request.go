package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/infra/jsonwire"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// turn is a parsed POST /v1/tool_calls body: the calls in order, some
// already answered here (an OpenAI call whose arguments are not JSON, or
// whose type is not "function").
type turn struct {
	shape shape                   // the shape the body was read in, and its answer is written in
	calls []envelope.ToolUseBlock // the calls, keyed by the pool's ids
	local []*envelope.Result      // local[i] != nil: calls[i] is answered, not dispatched
	wire  []wireCall              // what the answer to calls[i] names besides calls[i].Name
	// report is what the policy gate tells of the calls sent to it
	// (policy.WithReport), at the positions sent (nil: all of them).
	report policy.Report
	sent   []int
}

// wireCall is what the answer to one call needs from the request: the id
// to answer it by (for Gemini, "" when the call had none, though the pool
// keys it by a stand-in; see geminiKey) and, for Responses, the output
// item's type.
type wireCall struct {
	id         string
	outputType string
}

// newTurn is an empty turn of shape s with room for n calls.
func newTurn(s shape, n int) *turn {
	return &turn{shape: s, calls: make([]envelope.ToolUseBlock, 0, n), local: make([]*envelope.Result, 0, n), wire: make([]wireCall, 0, n)}
}

// add appends a call; local, when not nil, is its answer.
func (t *turn) add(call envelope.ToolUseBlock, local *envelope.Result, w wireCall) {
	t.calls = append(t.calls, call)
	t.local = append(t.local, local)
	t.wire = append(t.wire, w)
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

// badRequest is a body the handler refuses with 400; its message says what
// is wrong.
type badRequest struct{ msg string }

// Error is the message of the 400.
func (e *badRequest) Error() string { return e.msg }

func badf(format string, args ...any) error { return &badRequest{msg: fmt.Sprintf(format, args...)} }

// errTooManyCalls refuses a turn of more than maxCalls calls.
func errTooManyCalls(maxCalls int) error {
	return badf("more than %d tool calls in one request; send them in smaller batches", maxCalls)
}

const shapeHint = `expected an assistant message: {"role":"assistant","content":[…tool_use blocks…]} (Anthropic Messages), ` +
	`{"role":"assistant","tool_calls":[…]} (OpenAI Chat Completions), a response or its output array of function_call items ` +
	`(OpenAI Responses API), or {"role":"model","parts":[…functionCall parts…]} or a whole response (Gemini)`

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

// parseTurn reads a request body. forced, when not nil, is the shape the
// request named in ?format=; otherwise the body's shape decides (see
// shapes; defaultShape when nothing does). A body whose shape is clearly
// another than forced is refused, naming both.
func parseTurn(body []byte, forced shape, maxCalls int) (*turn, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, badf("the body is empty; %s", shapeHint)
	}
	if !jsonwire.Valid(body) {
		return nil, badf("the body is not valid JSON: %s", syntaxDetail(body))
	}
	switch body[0] {
	case '[':
		items, err := decodeArray(body)
		if err != nil {
			return nil, badf("the body is not valid JSON: %s", syntaxDetail(body))
		}
		seen, what := detectArray(items)
		s, err := choose(forced, seen, what)
		if err != nil {
			return nil, err
		}
		return s.parseArray(items, maxCalls)
	case '{':
		msg, err := decodeObject(body)
		if err != nil {
			return nil, badf("the body is not valid JSON: %s", syntaxDetail(body))
		}
		seen, what, err := detectObject(msg)
		if err != nil {
			return nil, err
		}
		s, err := choose(forced, seen, what)
		if err != nil {
			return nil, err
		}
		return s.parseObject(msg, forced != nil, maxCalls)
	}
	return nil, badf("the body is a JSON %s; %s", kind(body), shapeHint)
}

// checkAssistant checks a chat message (Anthropic's or OpenAI's): its
// role, when given, is "assistant", and, unless the format was forced, it
// has content or tool_calls.
func checkAssistant(msg map[string]json.RawMessage, forced bool) error {
	if role, ok := msg["role"]; ok && !isNull(role) {
		var r string
		if decodeString(role, &r) != nil {
			return badf("role: must be a string, not a JSON %s", kind(role))
		}
		if r != "assistant" {
			return badf("role: is %q; post the assistant message that asked for the tools", r)
		}
	}
	_, hasCalls := msg["tool_calls"]
	_, hasContent := msg["content"]
	if !forced && !hasCalls && !hasContent {
		return badf("the body has neither \"content\" nor \"tool_calls\"; %s", shapeHint)
	}
	return nil
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
		if decodeString(raw, &s) != nil {
			return nil, "the arguments string is not a valid JSON string"
		}
		text = bytes.TrimSpace([]byte(s))
		if len(text) == 0 {
			return json.RawMessage(`{}`), ""
		}
	}
	if !jsonwire.Valid(text) {
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
