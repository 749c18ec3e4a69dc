package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// ToolUseBlocks returns the tool_use blocks of a model's message, in order:
// what to dispatch after a response with stop_reason "tool_use".
func ToolUseBlocks(msg *anthropic.Message) []anthropic.ToolUseBlock {
	if msg == nil {
		return nil
	}
	var out []anthropic.ToolUseBlock
	for _, c := range msg.Content {
		if c.Type == "tool_use" {
			out = append(out, c.AsToolUse())
		}
	}
	return out
}

// ToolUse converts an SDK tool_use block to the envelope's. The input is
// shared, not copied; a missing input becomes {}.
func ToolUse(b anthropic.ToolUseBlock) envelope.ToolUseBlock {
	in := b.Input
	if len(bytes.TrimSpace(in)) == 0 {
		in = json.RawMessage(`{}`)
	}
	return envelope.ToolUseBlock{Type: "tool_use", ID: b.ID, Name: b.Name, Input: in}
}

// ToolUses converts SDK tool_use blocks to the envelope's.
func ToolUses(bs []anthropic.ToolUseBlock) []envelope.ToolUseBlock {
	out := make([]envelope.ToolUseBlock, len(bs))
	for i, b := range bs {
		out[i] = ToolUse(b)
	}
	return out
}

// ToolResult converts an envelope tool_result block to the SDK's param, for
// the next user message. IsError is set only when true (the API's
// default is false). Text blocks become TextBlockParam; other blocks
// become the SDK's variant when it reads them back unchanged, and are
// otherwise sent as they are.
func ToolResult(b envelope.ToolResultBlock) anthropic.ToolResultBlockParam {
	p := anthropic.ToolResultBlockParam{
		ToolUseID: b.ToolUseID,
		Content:   make([]anthropic.ToolResultBlockParamContentUnion, 0, len(b.Content)),
	}
	if b.IsError {
		p.IsError = anthropic.Bool(true)
	}
	for _, blk := range b.Content {
		p.Content = append(p.Content, contentParam(blk))
	}
	return p
}

// ToolResults converts envelope tool_result blocks to the SDK's params.
func ToolResults(bs []envelope.ToolResultBlock) []anthropic.ToolResultBlockParam {
	out := make([]anthropic.ToolResultBlockParam, len(bs))
	for i, b := range bs {
		out[i] = ToolResult(b)
	}
	return out
}

// contentParam converts one content block of a result.
func contentParam(b envelope.Block) anthropic.ToolResultBlockParamContentUnion {
	if b.Type == "text" {
		return anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: b.Text}}
	}
	var u anthropic.ToolResultBlockParamContentUnion
	if json.Unmarshal(b.Raw, &u) == nil {
		if back, err := json.Marshal(u); err == nil && sameJSON(back, b.Raw) {
			return u
		}
	}
	return param.Override[anthropic.ToolResultBlockParamContentUnion](json.RawMessage(bytes.Clone(b.Raw)))
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// UserMessage is the user message carrying results: append it to the
// conversation after the assistant message that asked for them. Do not
// send it when results is empty (the API refuses an empty message): a turn
// without tool_use blocks needs no answer.
func UserMessage(results []anthropic.ToolResultBlockParam) anthropic.MessageParam {
	blocks := make([]anthropic.ContentBlockParamUnion, len(results))
	for i := range results {
		blocks[i] = anthropic.ContentBlockParamUnion{OfToolResult: &results[i]}
	}
	return anthropic.NewUserMessage(blocks...)
}

// ToolParam converts a tool definition to the SDK's tool param, for
// MessageNewParams.Tools. The input schema is kept whole: "properties" and
// "required" in their fields, every other keyword in ExtraFields.
func ToolParam(d tools.Definition) (anthropic.ToolUnionParam, error) {
	var schema map[string]any
	if err := json.Unmarshal(d.InputSchema, &schema); err != nil || schema == nil {
		return anthropic.ToolUnionParam{}, fmt.Errorf("client: tool %q: the input schema is not a JSON object", d.Name)
	}
	in := anthropic.ToolInputSchemaParam{Properties: schema["properties"]}
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			s, ok := r.(string)
			if !ok {
				return anthropic.ToolUnionParam{}, fmt.Errorf("client: tool %q: \"required\" must list strings", d.Name)
			}
			in.Required = append(in.Required, s)
		}
	} else if _, present := schema["required"]; present {
		return anthropic.ToolUnionParam{}, fmt.Errorf("client: tool %q: \"required\" must be an array", d.Name)
	}
	for k, v := range schema {
		switch k {
		case "type", "properties", "required":
			continue
		}
		if in.ExtraFields == nil {
			in.ExtraFields = map[string]any{}
		}
		in.ExtraFields[k] = v
	}
	tp := anthropic.ToolParam{Name: d.Name, InputSchema: in}
	if d.Description != "" {
		tp.Description = anthropic.String(d.Description)
	}
	return anthropic.ToolUnionParam{OfTool: &tp}, nil
}

// ToolParams converts tool definitions to the SDK's tool params.
func ToolParams(defs []tools.Definition) ([]anthropic.ToolUnionParam, error) {
	out := make([]anthropic.ToolUnionParam, len(defs))
	for i, d := range defs {
		p, err := ToolParam(d)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}
