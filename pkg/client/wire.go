package client

import (
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// What the client reads and writes of the HTTP API (docs/http-api.md): the
// client is the other end of the wire, so it spells the wire out itself
// instead of linking the server's package.
const (
	pathToolCalls = "/v1/tool_calls"
	pathTools     = "/v1/tools"
	// headerSession names the agent session of a POST /v1/tool_calls.
	headerSession = "Toolpool-Session"
)

// userMessage is the answer to a POST /v1/tool_calls in the Anthropic
// format: the next user message, one tool_result block per call.
type userMessage struct {
	Content []envelope.ToolResultBlock `json:"content"`
}

// toolsResponse is the answer to GET /v1/tools.
type toolsResponse struct {
	Tools []tools.Definition `json:"tools"`
}

// errorResponse is the body of an answer that is not a 200 (but a 429's,
// which is the turn's answer).
type errorResponse struct {
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}
