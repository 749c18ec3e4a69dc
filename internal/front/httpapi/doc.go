// Package httpapi is the orchestrator's HTTP API for agents written in any
// language: an agent posts the assistant message that asked for tools and
// gets back the message to append to its conversation.
//
//	POST /v1/tool_calls   an assistant turn (Anthropic, OpenAI Chat Completions, OpenAI Responses or Gemini) → its tool results
//	GET  /v1/tools        the live tool definitions (?format=openai|responses|gemini for the others' shapes)
//
// # Tool calls
//
// Each format is answered in its own shape, one result per call in the
// calls' order:
//
//   - Anthropic (FormatAnthropic): the assistant message
//     {"role":"assistant","content":[…]} as the Messages API returned it,
//     or its content array; tool_use blocks run, other blocks are ignored.
//     The answer is the next user message of tool_result blocks, is_error
//     set on failures (UserMessage).
//   - OpenAI Chat Completions (FormatOpenAI): the assistant message with
//     tool_calls, or the array alone. The answer is an array of tool
//     messages (ToolMessage).
//   - OpenAI Responses (FormatResponses): a Response, or its output array;
//     function_call items run, keyed by call_id. The answer is an array of
//     function_call_output items (FunctionCallOutput) to append to the
//     next request's input.
//   - Gemini (FormatGemini): a Content {"role":"model","parts":[…]}, a
//     whole GenerateContentResponse (its candidates[0].content) or the
//     parts array; functionCall parts run. The answer is a Content of
//     functionResponse parts (GeminiContent), the result under
//     response.output, an error under response.error. A call without an id
//     is answered without one and keyed "gemini:<turn>:<position>", turn
//     being the responseId or a hash of the parts.
//
// Chat tool messages and Responses outputs have no error flag: an error's
// text starts with ErrorPrefix ("Error: "). The header
// Toolpool-Error-Indexes lists the positions of the errors ("0,2") in
// every format. Arguments that are not valid JSON answer that call with an
// error the model can act on; the other calls still run.
//
//	{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":[{"type":"text","text":"hello"}]}]}
//	[{"role":"tool","tool_call_id":"call_1","content":"hello"}]
//	[{"type":"function_call_output","call_id":"call_1","output":"hello"}]
//	{"role":"user","parts":[{"functionResponse":{"id":"g1","name":"echo","response":{"output":"hello"}}}]}
//
// The format is read from the body's shape or forced with
// ?format=anthropic|openai|responses|gemini; a body clearly of another
// format than the one forced is refused with a 400 naming both. A message
// without tool calls gets its format's empty answer. The session (header
// Toolpool-Session or ?session=) scopes the advice the pool adds when one
// tool keeps failing; ?timeout= (a Go duration or seconds, at most
// Config.MaxTimeout) bounds the wait; a W3C traceparent header is put on
// every call and returned.
//
// Bodies must be sent as application/json (415 otherwise). Ids and the
// session are 1 to 256 printable ASCII characters without spaces (400
// naming the field otherwise).
//
// Errors are JSON, {"error":{"type":…,"message":…}}: 400 for a body that
// is not such a message (the message says what is wrong), 401 without a
// valid API key (Config.Keys), 413 over Config.MaxBodyBytes, 405 for a
// wrong method, 503 with Retry-After when the pool cannot take calls. When
// admission control refuses a turn (dispatch.ErrSaturated) the answer is
// 429 with Retry-After and a body in the turn's format, every call an
// is_error that says the pool is saturated. Bad input never gets a 500.
//
// # API keys
//
// With Config.Keys (package apikey: a YAML or JSON file, or
// TOOLPOOL_API_KEYS), every request needs Authorization: Bearer <key>.
// The key's tenant goes with the calls (dispatch.WithTenant), with its
// weight in fair shares (dispatch.WithWeight) and its calls' priority
// (dispatch.WithPriority): the key's, or the one the request asks for with
// the header Toolpool-Priority or ?priority= within the key's MaxPriority
// (403 above it, 400 for a value that is not a priority). A key with a
// tool list lists and calls only those tools.
//
// # Server
//
// Server is the HTTP server in front of the Handler, the health probes and
// the metrics: Host and Origin checks (browsers and DNS rebinding), read
// and write deadlines per request, bounds on connections and requests,
// and a drain on Shutdown.
//
// # Mounting
//
//	api, err := httpapi.New(httpapi.Config{
//		Dispatcher:  d,                                   // a started *dispatch.Dispatcher
//		Definitions: httpapi.RegistryDefinitions(reg),    // or the live catalog
//		Logger:      logger,
//	})
//	if err != nil { … }
//	mux.Handle("/v1/", api)
//
// docs/http-api.md has request and answer examples for the four formats, a
// TypeScript loop per official SDK, and everything the API refuses.
package httpapi
