package mcpwire

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// TestFromPool: every kind of block maps onto MCP content without loss.
func TestFromPool(t *testing.T) {
	t.Parallel()
	png := []byte{0x89, 'P', 'N', 'G'}
	b64 := base64.StdEncoding.EncodeToString(png)
	c := envelope.Content{
		{Type: "text", Text: "hello"},
		{Type: "image", Raw: json.RawMessage(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + b64 + `"}}`)},
		{Type: "image", Raw: json.RawMessage(`{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}`)},
		{Type: "document", Raw: json.RawMessage(`{"type":"document","title":"notes","source":{"type":"text","media_type":"text/plain","data":"some notes"}}`)},
		{Type: "audio", Raw: json.RawMessage(`{"type":"audio","data":"` + b64 + `","mimeType":"audio/wav"}`)},
		{Type: "resource_link", Raw: json.RawMessage(`{"type":"resource_link","uri":"file:///a.txt","name":"a.txt"}`)},
		{Type: "search_result", Raw: json.RawMessage(`{"type":"search_result","source":"https://example.com","title":"x","content":[]}`)},
	}
	got := FromPool(c)
	if len(got) != len(c) {
		t.Fatalf("%d blocks for %d", len(got), len(c))
	}
	if tc, ok := got[0].(*mcp.TextContent); !ok || tc.Text != "hello" {
		t.Errorf("text: %#v", got[0])
	}
	if ic, ok := got[1].(*mcp.ImageContent); !ok || string(ic.Data) != string(png) || ic.MIMEType != "image/png" {
		t.Errorf("image: %#v", got[1])
	}
	if rl, ok := got[2].(*mcp.ResourceLink); !ok || rl.URI != "https://example.com/a.png" {
		t.Errorf("image by URL: %#v", got[2])
	}
	if er, ok := got[3].(*mcp.EmbeddedResource); !ok || er.Resource.Text != "some notes" || er.Resource.URI != "toolpool:document/notes" {
		t.Errorf("document: %#v", got[3])
	}
	if ac, ok := got[4].(*mcp.AudioContent); !ok || string(ac.Data) != string(png) || ac.MIMEType != "audio/wav" {
		t.Errorf("audio: %#v", got[4])
	}
	if rl, ok := got[5].(*mcp.ResourceLink); !ok || rl.URI != "file:///a.txt" || rl.Name != "a.txt" {
		t.Errorf("resource link: %#v", got[5])
	}
	if er, ok := got[6].(*mcp.EmbeddedResource); !ok || er.Resource.MIMEType != "application/json" ||
		er.Resource.Text != string(c[6].Raw) || er.Resource.URI != "toolpool:block/search_result" {
		t.Errorf("other block: %#v", got[6])
	}
}
