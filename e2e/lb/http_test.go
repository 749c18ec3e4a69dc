package lb_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/toolpool/toolpool/internal/front/httpapi"
)

// toolUse is one Anthropic tool_use block calling the tool with marker.
type toolUse struct {
	Type  string         `json:"type"`
	ID    string         `json:"id"`
	Name  string         `json:"name"`
	Input map[string]any `json:"input"`
}

// napCall is a tool_use block of the nap tool whose id and marker are id.
func napCall(id string) toolUse {
	return toolUse{Type: "tool_use", ID: id, Name: napTool, Input: map[string]any{"marker": id}}
}

// anthropicAnswer is the answer of POST /v1/tool_calls to an Anthropic
// message.
type anthropicAnswer struct {
	Role    string `json:"role"`
	Content []struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
		IsError   bool   `json:"is_error"`
		Content   []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"content"`
}

// text is the answer's text for call id, and whether it is an error;
// found is false when the answer holds no result for id.
func (a anthropicAnswer) text(id string) (text string, isError, found bool) {
	for _, c := range a.Content {
		if c.ToolUseID != id {
			continue
		}
		for _, p := range c.Content {
			text += p.Text
		}
		return text, c.IsError, true
	}
	return "", false, false
}

// messageBody is the JSON of an assistant message holding calls.
func messageBody(t *testing.T, calls ...toolUse) []byte {
	t.Helper()
	body, err := json.Marshal(map[string]any{"role": "assistant", "content": calls})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// postCalls posts calls to POST /v1/tool_calls through the proxy with the
// given extra headers and returns the response and its body.
func (s *stack) postCalls(query string, header http.Header, calls ...toolUse) (*http.Response, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, s.lbURL+httpapi.PathToolCalls+query, bytes.NewReader(messageBody(s.t, calls...)))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		req.Header[k] = vs
	}
	return s.do(req)
}

// do sends req and reads the whole answer.
func (s *stack) do(req *http.Request) (*http.Response, []byte, error) {
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// TestHTTPSyncCallsAcrossReplicas posts sync tool calls, one after the
// other on one kept-alive connection to the proxy: the proxy hands them
// to both replicas in turn (its header, its log and each replica's own
// request counter agree), and every answer holds the right result.
func TestHTTPSyncCallsAcrossReplicas(t *testing.T) {
	t.Parallel()
	s := startStack(t, stackConfig{workers: 1, concurrency: 8, napSeconds: 0})
	const n = 20
	seen := map[string]int{}
	var order []string
	for i := range n {
		id := fmt.Sprintf("toolu_lb_sync_%02d", i)
		resp, body, err := s.postCalls("?timeout=30s", http.Header{"Toolpool-Session": {"lb-sync"}}, napCall(id), napCall(id+"b"))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("call %d: %s: %s", i, resp.Status, body)
		}
		var a anthropicAnswer
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("call %d: %v: %s", i, err, body)
		}
		if a.Role != "user" || len(a.Content) != 2 {
			t.Fatalf("call %d: answer %s, want a user message with 2 results", i, body)
		}
		for _, cid := range []string{id, id + "b"} {
			text, isErr, found := a.text(cid)
			if !found || isErr || text != "napped "+cid {
				t.Errorf("call %s: result %q (error %v, found %v), want %q", cid, text, isErr, found, "napped "+cid)
			}
		}
		r := resp.Header.Get(replicaHeader)
		seen[r]++
		order = append(order, r)
	}
	t.Logf("replicas in order: %v", order)
	if seen["r1"] == 0 || seen["r2"] == 0 || seen["r1"]+seen["r2"] != n {
		t.Fatalf("answers by replica %v, want both r1 and r2 and no other", seen)
	}
	switches := 0
	for i := 1; i < len(order); i++ {
		if order[i] != order[i-1] {
			switches++
		}
	}
	// Round robin with no stickiness: consecutive requests of one client
	// on one connection alternate (health checks are not balanced).
	if switches < n/2 {
		t.Errorf("consecutive requests changed replica %d times in %d, want round robin: %v", switches, n-1, order)
	}
	s.waitLogged(http.MethodPost, httpapi.PathToolCalls, seen)
	for _, r := range s.replicas {
		served := s.metric(r, "toolpool_http_requests_total", `route="`+httpapi.PathToolCalls+`"`, `code="200"`)
		if int(served) != seen[r.name] {
			t.Errorf("replica %s counted %v requests to %s, the proxy sent it %d", r.name, served, httpapi.PathToolCalls, seen[r.name])
		}
	}
	ex := s.executions()
	if len(ex) != 2*n {
		t.Errorf("%d calls executed, want %d", len(ex), 2*n)
	}
	for m, ws := range ex {
		if len(ws) != 1 {
			t.Errorf("call %s executed %d times: %v", m, len(ws), ws)
		}
	}
}
