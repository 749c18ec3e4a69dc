package mcpback

import (
	"encoding/base64"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// imageBlock is an Anthropic image block with a base64 source.
type imageBlock struct {
	Type   string      `json:"type"`
	Source imageSource `json:"source"`
}

type imageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// ToPool maps an MCP result's content to pool content blocks: text to a
// text block, an image to an Anthropic image block (base64 source), and
// audio, an embedded resource or a resource link to a block holding the
// MCP JSON as it is (types "audio", "resource", "resource_link"). FromPool
// maps them back.
func ToPool(content []mcp.Content) envelope.Content {
	out := make(envelope.Content, 0, len(content))
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.TextContent:
			out = append(out, envelope.Block{Type: "text", Text: c.Text})
		case *mcp.ImageContent:
			raw, err := json.Marshal(imageBlock{Type: "image", Source: imageSource{Type: "base64", MediaType: c.MIMEType, Data: encodeBase64(c.Data)}})
			if err == nil {
				out = append(out, envelope.Block{Type: "image", Raw: raw})
			}
		default:
			raw, err := json.Marshal(c)
			if err != nil {
				continue
			}
			var head struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(raw, &head) == nil && head.Type != "" {
				out = append(out, envelope.Block{Type: head.Type, Raw: raw})
			}
		}
	}
	return out
}

// FromPool maps pool content blocks to MCP content, the inverse of
// ToPool. A block MCP has no type for (an Anthropic document, say) becomes
// a text block holding its JSON, so nothing is dropped.
func FromPool(content envelope.Content) []mcp.Content {
	out := make([]mcp.Content, 0, len(content))
	for _, b := range content {
		switch b.Type {
		case "text":
			out = append(out, &mcp.TextContent{Text: b.Text})
			continue
		case "image":
			var img imageBlock
			if json.Unmarshal(b.Raw, &img) == nil && img.Source.Type == "base64" {
				if data, err := decodeBase64(img.Source.Data); err == nil {
					out = append(out, &mcp.ImageContent{MIMEType: img.Source.MediaType, Data: data})
					continue
				}
			}
		case "audio", "resource", "resource_link":
			if c, err := unmarshalContent(b.Raw); err == nil {
				out = append(out, c)
				continue
			}
		}
		out = append(out, &mcp.TextContent{Text: string(b.Raw)})
	}
	return out
}

func encodeBase64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }

func decodeBase64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

// unmarshalContent reads one MCP content block, as the SDK reads a
// result's.
func unmarshalContent(raw json.RawMessage) (mcp.Content, error) {
	var res mcp.CallToolResult
	if err := json.Unmarshal([]byte(`{"content":[`+string(raw)+`]}`), &res); err != nil {
		return nil, err
	}
	if len(res.Content) != 1 {
		return nil, errors.New("mcpback: not one content block")
	}
	return res.Content[0], nil
}
