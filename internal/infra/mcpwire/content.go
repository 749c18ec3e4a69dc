// Package mcpwire maps content between the pool and MCP, both ways, for
// the MCP front door (internal/front/mcpfront: pool results to an MCP client) and the
// MCP backend (internal/worker/mcpback: an MCP server's results into the pool): one
// mapping, so that a block that goes through both comes back as it was.
package mcpwire

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"strconv"

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
// maps them back without loss.
func ToPool(content []mcp.Content) envelope.Content {
	out := make(envelope.Content, 0, len(content))
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.TextContent:
			out = append(out, envelope.Block{Type: "text", Text: c.Text})
		case *mcp.ImageContent:
			raw, err := json.Marshal(imageBlock{Type: "image", Source: imageSource{Type: "base64", MediaType: c.MIMEType, Data: base64.StdEncoding.EncodeToString(c.Data)}})
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

// FromPool maps a pool result's content onto MCP content blocks, keeping
// every block:
//
//   - text → text;
//   - an Anthropic image (source base64) → image with its bytes and MIME
//     type; an image by URL → a resource_link to it;
//   - an Anthropic document (base64, text or URL source) → an embedded
//     resource (blob or text) or a resource_link;
//   - a block already in MCP's shape (image or audio with data and
//     mimeType, resource_link, resource: what an MCP backend returns) →
//     that block;
//   - any other block → an embedded resource of type application/json
//     holding the block as it was (URI toolpool:block/<type>).
func FromPool(c envelope.Content) []mcp.Content {
	out := make([]mcp.Content, 0, len(c))
	for i, b := range c {
		if b.Type == "text" {
			out = append(out, &mcp.TextContent{Text: b.Text})
			continue
		}
		out = append(out, block(b, i))
	}
	return out
}

// anthropicBlock is what FromPool reads of an Anthropic image or document.
type anthropicBlock struct {
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
	Title string `json:"title"`
	// MCP's shape
	Data     *string `json:"data"`
	MIMEType string  `json:"mimeType"`
}

// block maps one block that is not text; i is its index, for names.
func block(b envelope.Block, i int) mcp.Content {
	var a anthropicBlock
	if json.Unmarshal(b.Raw, &a) == nil {
		switch {
		case a.Source != nil && (b.Type == "image" || b.Type == "document"):
			if c := anthropicSource(b.Type, a, i); c != nil {
				return c
			}
		case b.Type == "image" || b.Type == "audio" || b.Type == "resource_link" || b.Type == "resource":
			if c := mcpBlock(b.Raw); c != nil {
				return c
			}
		}
	}
	return &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
		URI: "toolpool:block/" + b.Type, MIMEType: "application/json", Text: string(b.Raw),
	}}
}

// anthropicSource maps an Anthropic image or document by its source; nil
// when the source is not one it knows.
func anthropicSource(typ string, a anthropicBlock, i int) mcp.Content {
	s := a.Source
	name := a.Title
	if name == "" {
		name = typ + "-" + strconv.Itoa(i+1)
	}
	switch s.Type {
	case "base64":
		data, err := base64.StdEncoding.DecodeString(s.Data)
		if err != nil {
			return nil
		}
		if typ == "image" {
			return &mcp.ImageContent{Data: data, MIMEType: s.MediaType}
		}
		return &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "toolpool:document/" + name, MIMEType: s.MediaType, Blob: data}}
	case "text":
		if typ == "document" {
			return &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: "toolpool:document/" + name, MIMEType: cmp.Or(s.MediaType, "text/plain"), Text: s.Data,
			}}
		}
	case "url":
		if s.URL != "" {
			return &mcp.ResourceLink{URI: s.URL, Name: name}
		}
	}
	return nil
}

// mcpBlock decodes a block in MCP's own shape with the go-sdk; nil when
// it is not one.
func mcpBlock(raw json.RawMessage) mcp.Content {
	var r mcp.CallToolResult
	data := append(append([]byte(`{"content":[`), raw...), "]}"...)
	if json.Unmarshal(data, &r) != nil || len(r.Content) != 1 {
		return nil
	}
	switch c := r.Content[0].(type) {
	case *mcp.ImageContent:
		if c.MIMEType == "" {
			return nil
		}
	case *mcp.AudioContent:
		if c.MIMEType == "" {
			return nil
		}
	case *mcp.ResourceLink:
		if c.URI == "" {
			return nil
		}
	case *mcp.EmbeddedResource:
		if c.Resource == nil || c.Resource.URI == "" {
			return nil
		}
	}
	return r.Content[0]
}
