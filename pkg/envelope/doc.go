// Package envelope is the wire contract of toolpool: the call a worker
// receives on tools.call.<tool> and the result it sends back on
// tools.result.<instance>.<key> (the key is CallKey's), both JSON with a
// version field "v" (currently 1), and their conversions to and from
// Anthropic Messages API content blocks.
//
// A tool author rarely imports it: a handler returns tools.Output, whose
// Content is a Content of this package, and tools.Text builds text. It is
// for content beyond text (a Block holding an image or a document) and for
// code that reads calls or results off the wire.
//
// # Calls
//
// The orchestrator turns each tool_use block of the model into a Call, fills
// in the session, its own instance name and the times, and encodes it:
//
//	call := envelope.CallFromToolUse(toolUse) // ID = tool_use id, Tool, Input
//	call.Session = "sess-42"
//	call.ReplyTo = "orch-1"
//	call.CreatedAt = time.Now()
//	call.Deadline = call.CreatedAt.Add(2 * time.Minute)
//	data, err := envelope.EncodeCall(&call) // publish data; Nats-Msg-Id = call.ID
//
// A worker decodes strictly. Anything it cannot trust comes back as a
// *DecodeError naming the field, wrapping ErrMalformed, ErrVersion or
// ErrTooLarge:
//
//	call, err := envelope.DecodeCall(msg.Data(), envelope.Limits{})
//	var de *envelope.DecodeError
//	if errors.As(err, &de) {
//		// e.g. `envelope: field "input": must be a JSON object, not an array`
//	}
//
// Members a decoder does not know are ignored, so a v1 writer may add
// optional fields; a change readers must understand needs a new version.
//
// # Results
//
// The worker builds a Result, caps its text and encodes it:
//
//	res := envelope.Result{
//		CallID:   call.ID,
//		Tool:     call.Tool,
//		Content:  envelope.Text(out).Truncate(envelope.MaxContentBytesDefault),
//		Attempts: 1,
//		ExecTime: time.Since(start),
//	}
//	data, err := envelope.EncodeResult(&res)
//
// An error result sets IsError, writes its Content for the model (what went
// wrong, what to try next) and fills the machine fields: Class, Code,
// Retryable, RetryAfter.
//
// # Back to the model
//
// The orchestrator decodes the result and hands the model a tool_result
// block; is_error appears in its JSON only when true:
//
//	res, err := envelope.DecodeResult(data)
//	block := res.ToolResult() // {"type":"tool_result","tool_use_id":…,"content":[…]}
//
// Content is a list of Anthropic content blocks. Text blocks are decoded into
// Block.Text; any other block (image, document) is kept verbatim in Block.Raw.
// A plain JSON string decodes as one text block.
//
// # On the hot path
//
// AppendCall and AppendResult encode into a buffer the caller keeps for
// reuse, and DecodeCallShared leaves the input in the message it was read
// from instead of copying it; each saves an allocation per message.
//
// Durations in a Result are integers of nanoseconds (fields ending in _ns);
// times in a Call are RFC 3339 strings.
package envelope
