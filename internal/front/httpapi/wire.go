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
	// request was read in: "anthropic", "openai", "responses" or "gemini".
	HeaderFormat = "Toolpool-Format"
	// HeaderErrorIndexes, on answers to POST /v1/tool_calls, lists the
	// zero-based positions of the results that are errors, comma-separated
	// ("0,2"); it is absent when none is. It is the machine-readable error
	// flag of the OpenAI and Responses formats, whose tool outputs have
	// none.
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
	// FormatResponses: the request is an OpenAI Responses API response, or
	// its output array; its function_call items run. The answer is a JSON
	// array of function_call_output items, one per call, keyed by call_id.
	FormatResponses Format = "responses"
	// FormatGemini: the request is a Gemini Content (role "model") or a
	// whole GenerateContentResponse (its candidates[0].content), or the
	// parts array; its functionCall parts run. The answer is a Content with
	// role "user" holding one functionResponse part per call.
	FormatGemini Format = "gemini"
)

// Formats lists the formats, in the order the documentation names them.
var Formats = []Format{FormatAnthropic, FormatOpenAI, FormatResponses, FormatGemini}

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

// ErrorPrefix starts the content of a ToolMessage, and the output of a
// FunctionCallOutput, whose call failed: OpenAI's tool messages and
// function_call_output items have no is_error flag, so the model reads it
// here (and programs read HeaderErrorIndexes).
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

// GeminiContent is the answer to a Gemini request: {"role":"user",
// "parts":[{"functionResponse":…}, …]}, one part per functionCall part in
// the same order. Parts is [] when the content had no functionCall.
type GeminiContent struct {
	Role  string       `json:"role"` // "user"
	Parts []GeminiPart `json:"parts"`
}

// GeminiPart is one part of a GeminiContent answer.
type GeminiPart struct {
	FunctionResponse GeminiFunctionResponse `json:"functionResponse"`
}

// GeminiFunctionResponse answers one functionCall. ID is the call's id,
// absent when the call had none; Response holds "output" (the result's
// text) or, for an error, "error" (the text for the model), as Gemini's
// FunctionResponse convention reads them.
type GeminiFunctionResponse struct {
	ID       string         `json:"id,omitempty"`
	Name     string         `json:"name"`
	Response GeminiResponse `json:"response"`
}

// GeminiResponse is a function response's payload: exactly one member is
// set.
type GeminiResponse struct {
	Output *string `json:"output,omitempty"`
	Error  *string `json:"error,omitempty"`
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

// GeminiTool is the element of the answer to GET /v1/tools?format=gemini
// (an array of one GeminiTool, none when there are no tools): a Gemini
// Tool for the "tools" of a GenerateContentConfig.
type GeminiTool struct {
	FunctionDeclarations []GeminiFunctionDeclaration `json:"functionDeclarations"`
}

// GeminiFunctionDeclaration describes a function to Gemini. The tool's
// input schema goes unchanged as ParametersJSONSchema (Gemini's
// parametersJsonSchema, full JSON Schema), not as the OpenAPI-subset
// "parameters".
type GeminiFunctionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
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
