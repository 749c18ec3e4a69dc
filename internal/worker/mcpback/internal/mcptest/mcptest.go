// Package mcptest is the MCP server the tests of package mcpback run as a
// backend: a go-sdk server with tools that answer, fail, sleep with
// progress, return every kind of content, and change the tool list.
// cmd/mcptestserver serves it on stdio; tests serve it over streamable
// HTTP themselves.
package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options choose the tools that only make sense in a process of their own.
type Options struct {
	// Crash adds crash_once {marker}: the first call (the marker file does
	// not exist yet) creates the marker and kills the process; later calls
	// answer "survived".
	Crash bool
	// Cancelled, when set, hears (without blocking) of a sleep whose
	// context ended before it finished.
	Cancelled chan<- struct{}
}

// NewServer returns the test server.
func NewServer(opts Options) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1"}, nil)
	addAnswering(s, opts)
	addChanging(s)
	if opts.Crash {
		s.AddTool(&mcp.Tool{
			Name: "crash_once", Description: "Kills its server at the first call.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"marker":{"type":"string"}},"required":["marker"]}`),
		}, crashOnce)
	}
	return s
}

// addAnswering adds the tools that answer: echo, fail, sleep, traceparent
// and media.
func addAnswering(s *mcp.Server, opts Options) {
	s.AddTool(&mcp.Tool{
		Name: "echo", Description: "Returns its text.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, echo)
	s.AddTool(&mcp.Tool{
		Name: "fail", Description: "Fails with its text as the tool's error.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`),
	}, withText(func(text string) *mcp.CallToolResult {
		return &mcp.CallToolResult{IsError: true, Content: textContent(text)}
	}))
	s.AddTool(&mcp.Tool{
		Name: "sleep", Description: "Sleeps for ms milliseconds in steps, reporting progress; cancellable.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer"},"steps":{"type":"integer"}},"required":["ms"]}`),
	}, sleep(opts.Cancelled))
	s.AddTool(&mcp.Tool{
		Name: "traceparent", Description: "Returns the traceparent of its request's _meta.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tp, _ := req.Params.Meta["traceparent"].(string)
		return &mcp.CallToolResult{Content: textContent("traceparent=" + tp)}, nil
	})
	s.AddTool(&mcp.Tool{
		Name: "media", Description: "Returns one block of each kind.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: Media()}, nil
	})
}

// addChanging adds the tools that change the server's tool list, which
// then sends list_changed: redescribe, add and drop.
func addChanging(s *mcp.Server) {
	s.AddTool(&mcp.Tool{
		Name: "redescribe", Description: "Changes echo's description to its text: the server sends list_changed.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`),
	}, withText(func(text string) *mcp.CallToolResult {
		s.AddTool(&mcp.Tool{
			Name: "echo", Description: text,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":5}},"required":["text"]}`),
		}, echo)
		return &mcp.CallToolResult{Content: textContent("ok")}
	}))
	s.AddTool(&mcp.Tool{
		Name: "add", Description: "Adds a tool named by its text, which echoes: the server sends list_changed.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`),
	}, withText(func(text string) *mcp.CallToolResult {
		s.AddTool(&mcp.Tool{
			Name: text, Description: "Echoes its text (added at runtime).",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		}, echo)
		return &mcp.CallToolResult{Content: textContent("ok")}
	}))
	s.AddTool(&mcp.Tool{
		Name: "drop", Description: "Removes the tool named by its text: the server sends list_changed.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`),
	}, withText(func(text string) *mcp.CallToolResult {
		s.RemoveTools(text)
		return &mcp.CallToolResult{Content: textContent("ok")}
	}))
}

// sleep is the handler of sleep: it sleeps for ms milliseconds in steps,
// reporting each step as progress, and tells cancelled (when not nil)
// of a sleep whose context ended first.
func sleep(cancelled chan<- struct{}) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct{ MS, Steps int }
		_ = json.Unmarshal(req.Params.Arguments, &in)
		steps := max(in.Steps, 1)
		for i := range steps {
			select {
			case <-ctx.Done():
				if cancelled != nil {
					select {
					case cancelled <- struct{}{}:
					default:
					}
				}
				return nil, ctx.Err()
			case <-time.After(time.Duration(in.MS) * time.Millisecond / time.Duration(steps)):
			}
			if token := req.Params.GetProgressToken(); token != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token, Progress: float64(i + 1), Total: float64(steps), Message: "step",
				})
			}
		}
		return &mcp.CallToolResult{Content: textContent("slept")}, nil
	}
}

// crashOnce is the handler of crash_once: the first call (its marker file
// does not exist yet) creates the marker and kills the process; later
// calls answer "survived".
func crashOnce(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct{ Marker string }
	_ = json.Unmarshal(req.Params.Arguments, &in)
	if _, err := os.Stat(in.Marker); errors.Is(err, os.ErrNotExist) {
		_ = os.WriteFile(in.Marker, nil, 0o644)
		os.Exit(3)
	}
	return &mcp.CallToolResult{Content: textContent("survived")}, nil
}

// echo answers with the call's text.
var echo = withText(func(text string) *mcp.CallToolResult { return &mcp.CallToolResult{Content: textContent(text)} })

// withText is a handler of a tool whose input is {"text": …}.
func withText(f func(text string) *mcp.CallToolResult) mcp.ToolHandler {
	return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct{ Text string }
		_ = json.Unmarshal(req.Params.Arguments, &in)
		return f(in.Text), nil
	}
}

func textContent(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

// Media is what the media tool returns: text, image, audio, an embedded
// resource and a resource link.
func Media() []mcp.Content {
	return []mcp.Content{
		&mcp.TextContent{Text: "a picture"},
		&mcp.ImageContent{MIMEType: "image/png", Data: []byte{0x89, 'P', 'N', 'G', 1, 2, 3}},
		&mcp.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF....WAVE")},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "notes"}},
		&mcp.ResourceLink{URI: "file:///big.bin", Name: "big.bin", MIMEType: "application/octet-stream"},
	}
}
