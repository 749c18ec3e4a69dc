package httpapi

import (
	"encoding/json"

	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Paths served by the Handler.
const (
	PathToolCalls = "/v1/tool_calls"
	PathTools     = "/v1/tools"
)

// Headers read or written by the Handler.
const (
	// HeaderSession names the agent session of a POST /v1/tool_calls (the
	// query parameter "session" is the alternative). It scopes the advice
	// the pool adds when one tool keeps failing.
	HeaderSession = "Toolpool-Session"
	// HeaderFormat, on answers to POST /v1/tool_calls, is the format the
	// request was read in: "anthropic" or "openai".
	HeaderFormat = "Toolpool-Format"
	// HeaderErrorIndexes, on answers to POST /v1/tool_calls, lists the
	// zero-based positions of the results that are errors, comma-separated
	// ("0,2"); it is absent when none is. It is the machine-readable error
	// flag of the OpenAI format, whose tool messages have none.
	HeaderErrorIndexes = "Toolpool-Error-Indexes"
)

// The W3C trace context travels in envelope.HeaderTraceparent. A valid one on
// a request is put on every call; the answer carries the trace context the
// calls were published with (a new one when the request had none).

// Format is the wire format of a POST /v1/tool_calls request and its
// answer.
type Format string

// The formats.
const (
	// FormatAnthropic: the request is an Anthropic assistant message, or its
	// content array; the answer is the next user message, holding one
	// tool_result block per tool_use block.
	FormatAnthropic Format = "anthropic"
	// FormatOpenAI: the request is an OpenAI Chat Completions assistant
	// message with tool_calls, or the tool_calls array; the answer is a
	// JSON array of "tool" messages, one per call.
	FormatOpenAI Format = "openai"
)

// UserMessage is the answer to an Anthropic request:
// {"role":"user","content":[tool_result, …]}. Content is [] when the
// message had no tool_use blocks.
type UserMessage struct {
	Role    string                     `json:"role"` // "user"
	Content []envelope.ToolResultBlock `json:"content"`
}

// ToolMessage is one element of the answer to an OpenAI request. The
// content of an error starts with ErrorPrefix.
type ToolMessage struct {
	Role       string `json:"role"` // "tool"
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
}

// ErrorPrefix starts the content of a ToolMessage whose call failed:
// OpenAI tool messages have no is_error flag, so the model reads it here
// (and programs read HeaderErrorIndexes).
const ErrorPrefix = "Error: "

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

// ToolsResponse is the answer to GET /v1/tools: the tools in the format of
// the Anthropic Messages API's "tools" parameter.
type ToolsResponse struct {
	Tools []tools.Definition `json:"tools"`
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

// ErrorResponse is the body of every answer that is not a 200.
type ErrorResponse struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong: Type is one of the ErrorType values,
// Message says what to change.
type ErrorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// The error types, by status. A 429 (the pool is saturated) has no
// ErrorResponse: its body is the answer in the request's format, every
// call answered with an is_error that says so (see Handler).
const (
	ErrorInvalidRequest       = "invalid_request"        // 400
	ErrorUnauthorized         = "unauthorized"           // 401: no or a wrong API key
	ErrorForbidden            = "forbidden"              // 403: a browser's cross-origin request, a Host not served, /metrics without the right key
	ErrorNotFound             = "not_found"              // 404
	ErrorMethodNotAllowed     = "method_not_allowed"     // 405
	ErrorTimeout              = "request_timeout"        // 408: the body did not arrive in time
	ErrorTooLarge             = "request_too_large"      // 413
	ErrorUnsupportedMediaType = "unsupported_media_type" // 415: not application/json
	ErrorClientClosed         = "client_closed"          // 499: the client went away
	ErrorInternal             = "internal"               // 500: never for bad input
	ErrorUnavailable          = "unavailable"            // 503: with Retry-After
)

// StatusClientClosed is the status logged (and written, though no one
// reads it) when the client went away before the results were in.
const StatusClientClosed = 499
