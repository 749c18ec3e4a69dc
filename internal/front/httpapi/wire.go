package httpapi

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

// ErrorPrefix starts the content of a ToolMessage, and the output of a
// FunctionCallOutput, whose call failed: OpenAI's tool messages and
// function_call_output items have no is_error flag, so the model reads it
// here (and programs read HeaderErrorIndexes).
const ErrorPrefix = "Error: "

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
