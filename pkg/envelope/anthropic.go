package envelope

import "encoding/json"

// ToolUseBlock is an Anthropic Messages API tool_use content block.
type ToolUseBlock struct {
	Type  string          `json:"type"`  // "tool_use"
	ID    string          `json:"id"`    // the tool_use id, which the tool_result answers
	Name  string          `json:"name"`  // the tool's name
	Input json.RawMessage `json:"input"` // the arguments, a JSON object
}

// ToolResultBlock is an Anthropic Messages API tool_result content block.
// IsError is omitted unless true, as the API expects.
type ToolResultBlock struct {
	Type      string  `json:"type"`               // "tool_result"
	ToolUseID string  `json:"tool_use_id"`        // the id of the tool_use block answered
	Content   Content `json:"content"`            // what the model reads
	IsError   bool    `json:"is_error,omitempty"` // the call failed; Content says why
}

// CallFromToolUse turns a tool_use block into a Call (V, ID, Tool, Input; the
// caller fills session, reply-to and times). The Call shares b.Input.
func CallFromToolUse(b ToolUseBlock) Call {
	return Call{V: Version, ID: b.ID, Tool: b.Name, Input: b.Input}
}

// ToolUse turns a Call back into a tool_use block. An empty input becomes {},
// since the API requires an object.
func (c *Call) ToolUse() ToolUseBlock {
	in := c.Input
	if len(trimSpace(in)) == 0 {
		in = json.RawMessage(`{}`)
	}
	return ToolUseBlock{Type: "tool_use", ID: c.ID, Name: c.Tool, Input: in}
}

// ToolResult turns a Result into a tool_result block. Empty text blocks are
// left out, because the API refuses them; is_error appears only when true.
func (r *Result) ToolResult() ToolResultBlock {
	return ToolResultBlock{Type: "tool_result", ToolUseID: r.CallID, Content: withoutEmptyText(r.Content), IsError: r.IsError}
}

// withoutEmptyText returns c without its empty text blocks, copying only if
// there are any.
func withoutEmptyText(c Content) Content {
	empty := 0
	for i := range c {
		if c[i].Type == "text" && c[i].Text == "" {
			empty++
		}
	}
	if empty == 0 {
		return c
	}
	out := make(Content, 0, len(c)-empty)
	for _, b := range c {
		if b.Type != "text" || b.Text != "" {
			out = append(out, b)
		}
	}
	return out
}

// ResultFromToolResult turns a tool_result block into a Result (V, CallID,
// Content, IsError). The machine-readable fields stay empty: a tool_result
// does not carry them.
func ResultFromToolResult(b ToolResultBlock) Result {
	return Result{V: Version, CallID: b.ToolUseID, Content: b.Content, IsError: b.IsError}
}
