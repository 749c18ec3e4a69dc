// Package fakeanthropic is a scripted stand-in for the Anthropic Messages
// API, for tests that drive the real anthropic-sdk-go against it (through
// option.WithBaseURL or ANTHROPIC_BASE_URL). POST /v1/messages answers the
// script's reply for the request's turn and records every request; it
// checks, as the real API does, that every tool_use block of an assistant
// message is answered by a tool_result of the next user message.
//
//	srv := fakeanthropic.Start(t, fakeanthropic.Script(
//		fakeanthropic.ToolUse(fakeanthropic.Call{ID: "toolu_1", Name: "echo", Input: `{"text":"hi"}`}),
//		fakeanthropic.Text("Done."),
//	))
//	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"))
package fakeanthropic

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Reply is one answer of the model.
type Reply struct {
	Content    []any  // content blocks, marshalled as JSON
	StopReason string // "end_turn", "tool_use", …
}

// Call is one tool_use block of a reply.
type Call struct {
	ID, Name string
	Input    string // JSON object
}

// ToolUse is a reply asking for calls, with a short text first.
func ToolUse(calls ...Call) Reply {
	content := []any{map[string]any{"type": "text", "text": "Calling tools."}}
	for _, c := range calls {
		content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": json.RawMessage(c.Input)})
	}
	return Reply{Content: content, StopReason: "tool_use"}
}

// Text is a final reply.
func Text(text string) Reply {
	return Reply{Content: []any{map[string]any{"type": "text", "text": text}}, StopReason: "end_turn"}
}

// Script answers the i-th request (0-based) with replies[i]; a request past
// the end fails the test's model call with a 500.
func Script(replies ...Reply) func(i int) (Reply, bool) {
	return func(i int) (Reply, bool) {
		if i >= len(replies) {
			return Reply{}, false
		}
		return replies[i], true
	}
}

// Request is a recorded request body.
type Request struct {
	Model     string            `json:"model"`
	MaxTokens int               `json:"max_tokens"`
	System    json.RawMessage   `json:"system"`
	Tools     []json.RawMessage `json:"tools"`
	Messages  []Message         `json:"messages"`
	APIKey    string            `json:"-"` // from X-Api-Key or Authorization: Bearer
	Raw       []byte            `json:"-"`
}

// Message is one message of a request; Content is normalised to blocks.
type Message struct {
	Role    string  `json:"role"`
	Content []Block `json:"-"`
	RawBody json.RawMessage
}

// UnmarshalJSON reads a message whose content is a string or blocks.
func (m *Message) UnmarshalJSON(data []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	m.Role, m.RawBody = raw.Role, append(json.RawMessage(nil), data...)
	var s string
	if json.Unmarshal(raw.Content, &s) == nil {
		m.Content = []Block{{Type: "text", Text: s}}
		return nil
	}
	return json.Unmarshal(raw.Content, &m.Content)
}

// Block is a content block of a request message, tool_result content
// flattened to its text.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   *bool           `json:"is_error"`
	Content   json.RawMessage `json:"content"`
}

// ResultText is the text of a tool_result block's content.
func (b Block) ResultText() string {
	var s string
	if json.Unmarshal(b.Content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type, Text string
	}
	_ = json.Unmarshal(b.Content, &blocks)
	var parts []string
	for _, x := range blocks {
		if x.Type == "text" {
			parts = append(parts, x.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ToolResults returns the tool_result blocks of the request's last message.
func (r Request) ToolResults() []Block {
	if len(r.Messages) == 0 {
		return nil
	}
	var out []Block
	for _, b := range r.Messages[len(r.Messages)-1].Content {
		if b.Type == "tool_result" {
			out = append(out, b)
		}
	}
	return out
}

// Server is a running fake.
type Server struct {
	URL string

	mu       sync.Mutex
	requests []Request
	script   func(i int) (Reply, bool)
}

// Start starts a fake answering from script; it stops when the test ends.
func Start(t testing.TB, script func(i int) (Reply, bool)) *Server {
	t.Helper()
	s := &Server{script: script}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		apiError(w, http.StatusNotFound, "not_found_error", "no such endpoint "+r.Method+" "+r.URL.Path)
		return
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	var req Request
	if err := json.Unmarshal(data, &req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "body: "+err.Error())
		return
	}
	req.Raw, req.APIKey = data, r.Header.Get("X-Api-Key")
	if req.APIKey == "" {
		req.APIKey = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	s.mu.Lock()
	i := len(s.requests)
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	if msg := check(req); msg != "" {
		apiError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	reply, ok := s.script(i)
	if !ok {
		apiError(w, http.StatusInternalServerError, "api_error", fmt.Sprintf("the script has no reply for request %d", i+1))
		return
	}
	body, _ := json.Marshal(map[string]any{
		"id": fmt.Sprintf("msg_%03d", i+1), "type": "message", "role": "assistant", "model": req.Model,
		"content": reply.Content, "stop_reason": reply.StopReason, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": 10, "output_tokens": 10},
	})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// check applies the API's rules on the conversation: it starts with a user
// message, roles alternate, and every tool_use is answered by a
// tool_result in the next message. It returns what is wrong, or "".
func check(req Request) string {
	if req.Model == "" || req.MaxTokens <= 0 {
		return "model and max_tokens are required"
	}
	for i, m := range req.Messages {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m.Role != want {
			return fmt.Sprintf("messages.%d: role %q, want %q", i, m.Role, want)
		}
		if len(m.Content) == 0 {
			return fmt.Sprintf("messages.%d: content must not be empty", i)
		}
		if m.Role != "assistant" {
			continue
		}
		var pending []string
		for _, b := range m.Content {
			if b.Type == "tool_use" {
				pending = append(pending, b.ID)
			}
		}
		if len(pending) == 0 || i+1 == len(req.Messages) {
			continue
		}
		answered := map[string]bool{}
		for _, b := range req.Messages[i+1].Content {
			if b.Type == "tool_result" {
				answered[b.ToolUseID] = true
			}
		}
		for _, id := range pending {
			if !answered[id] {
				return fmt.Sprintf("messages.%d: tool_use %s has no tool_result in the next message", i, id)
			}
		}
	}
	if len(req.Messages) == 0 || req.Messages[len(req.Messages)-1].Role != "user" {
		return "the last message must be a user message"
	}
	return ""
}

func apiError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	body, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	_, _ = w.Write(body)
}
