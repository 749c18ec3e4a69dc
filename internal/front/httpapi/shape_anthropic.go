package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/toolpool/toolpool/internal/infra/jsonwire"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// FormatAnthropic: the request is an Anthropic assistant message, or its
// content array; the answer is the next user message, holding one
// tool_result block per tool_use block. It is the format of a body that
// does not tell.
const FormatAnthropic Format = "anthropic"

// UserMessage is the answer to an Anthropic request:
// {"role":"user","content":[tool_result, …]}. Content is [] when the
// message had no tool_use blocks.
type UserMessage struct {
	Role    string                     `json:"role"` // "user"
	Content []envelope.ToolResultBlock `json:"content"`
}

// ToolsResponse is the answer to GET /v1/tools: the tools in the format of
// the Anthropic Messages API's "tools" parameter.
type ToolsResponse struct {
	Tools []tools.Definition `json:"tools"`
}

// anthropicShape is the Anthropic Messages API: tool_use content blocks
// in, tool_result blocks out.
type anthropicShape struct{}

// anthropicBlockTypes are the types of Anthropic content blocks that no
// other format's items have ("text" is not one: OpenAI's content parts
// have it too).
var anthropicBlockTypes = map[string]bool{
	"tool_use": true, "thinking": true, "redacted_thinking": true, "server_tool_use": true,
	"tool_result": true, "image": true, "document": true, "search_result": true, "mcp_tool_use": true,
	"mcp_tool_result": true, "container_upload": true,
}

func (anthropicShape) format() Format { return FormatAnthropic }

func (anthropicShape) expects() string {
	return `an Anthropic Messages assistant message {"role":"assistant","content":[…tool_use blocks…]} or its content array`
}

func (anthropicShape) claimItem(it arrayItem, i int) (string, bool) {
	if anthropicBlockTypes[it.typ] || strings.HasSuffix(it.typ, "_tool_result") {
		return fmt.Sprintf("Anthropic content blocks (a %s block at [%d])", it.typ, i), true
	}
	return "", false
}

// claimObject: a message with content is a chat message, Anthropic's when
// its content has Anthropic blocks, else (a string, or no block that
// tells) of either chat format.
func (anthropicShape) claimObject(msg map[string]json.RawMessage) (string, claim) {
	raw, hasContent := msg["content"]
	if !hasContent {
		return "", notMine
	}
	if items, err := decodeArray(raw); err == nil {
		if s, _ := detectArray(items); s == (anthropicShape{}) {
			return "an Anthropic Messages assistant message (its content has Anthropic blocks)", mine
		}
	}
	return "", undecided
}

func (anthropicShape) refuseObject(map[string]json.RawMessage) error { return nil }

func (anthropicShape) parseArray(items []json.RawMessage, maxCalls int) (*turn, error) {
	return parseContent(items, "", maxCalls)
}

// parseObject reads an assistant message: its content array (a string or
// null content has nothing to run).
func (anthropicShape) parseObject(msg map[string]json.RawMessage, forced bool, maxCalls int) (*turn, error) {
	if err := checkAssistant(msg, forced); err != nil {
		return nil, err
	}
	rawContent, hasContent := msg["content"]
	if !hasContent {
		return nil, badf("content: missing; %s", shapeHint)
	}
	switch c := bytes.TrimSpace(rawContent); {
	case isNull(c), c[0] == '"':
		return &turn{shape: anthropicShape{}}, nil // text only: nothing to run
	case c[0] != '[':
		return nil, badf("content: must be an array of content blocks, not a JSON %s", kind(c))
	}
	items, err := decodeArray(rawContent)
	if err != nil {
		return nil, badf("content: not valid JSON")
	}
	return parseContent(items, "content", maxCalls)
}

// parseContent reads Anthropic content blocks: tool_use blocks become
// calls, every other block (text, thinking, …) is skipped.
func parseContent(items []json.RawMessage, field string, maxCalls int) (*turn, error) {
	t := newTurn(anthropicShape{}, min(len(items), maxCalls))
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
			if err := foreignItem(anthropicShape{}, block, typ, true, i, at); err != nil {
				return nil, err
			}
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
			return nil, errTooManyCalls(maxCalls)
		}
		t.add(envelope.ToolUseBlock{Type: "tool_use", ID: id, Name: name, Input: block["input"]}, nil, wireCall{id: id})
	}
	return t, nil
}

// answer is the next user message: one tool_result per tool_use block.
func (anthropicShape) answer(t *turn, results []envelope.Result) any {
	msg := UserMessage{Role: "user", Content: make([]envelope.ToolResultBlock, len(results))}
	for i := range results {
		b := results[i].ToolResult()
		b.ToolUseID = t.calls[i].ID
		msg.Content[i] = b
	}
	return msg
}

func (anthropicShape) toolList(defs []tools.Definition) any {
	if defs == nil {
		defs = []tools.Definition{}
	}
	return ToolsResponse{Tools: defs}
}

// appendJSON appends m as the answer's encoder writes it, newline included,
// when its content is text only and its other strings printable ASCII (the
// usual answer); ok is false otherwise, and the encoder writes it. (The
// text is written by Content.MarshalJSON's rules, which the encoder keeps;
// the other strings by the encoder's, which differ for some control
// characters.) It spares the encoder's reflection and its
// second pass over what Content.MarshalJSON wrote.
func (m UserMessage) appendJSON(dst []byte) (_ []byte, ok bool) {
	if !plainASCII(m.Role) {
		return dst, false
	}
	for i := range m.Content {
		if !plainASCII(m.Content[i].Type) || !plainASCII(m.Content[i].ToolUseID) {
			return dst, false
		}
		for _, b := range m.Content[i].Content {
			if b.Type != "text" {
				return dst, false
			}
		}
	}
	if n := m.sizeHint(); cap(dst)-len(dst) < n {
		dst = slices.Grow(dst, n) // one allocation of the answer's size, not a series of copies
	}
	dst = append(dst, `{"role":`...)
	dst = jsonwire.AppendString(dst, m.Role)
	dst = append(dst, `,"content":[`...)
	for i := range m.Content {
		r := &m.Content[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":`...)
		dst = jsonwire.AppendString(dst, r.Type)
		dst = append(dst, `,"tool_use_id":`...)
		dst = jsonwire.AppendString(dst, r.ToolUseID)
		dst = append(dst, `,"content":[`...)
		for j := range r.Content {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"type":"text","text":`...)
			dst = jsonwire.AppendString(dst, r.Content[j].Text)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
		if r.IsError {
			dst = append(dst, `,"is_error":true`...)
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}\n"...), true
}

// sizeHint is about the bytes appendJSON writes for m (more when the text
// must be escaped).
func (m UserMessage) sizeHint() int {
	n := 32 + len(m.Role)
	for i := range m.Content {
		n += 64 + len(m.Content[i].ToolUseID)
		for _, b := range m.Content[i].Content {
			n += 24 + len(b.Text)
		}
	}
	return n
}

// plainASCII reports whether s is printable ASCII without '"' or '\\':
// every JSON encoder writes it as it is.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
