package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/proctest"
	"github.com/toolpool/toolpool/internal/testdeps"
)

// The model APIs' official TypeScript SDKs (@anthropic-ai/sdk, openai,
// @google/genai, pinned in e2e/package-lock.json) each run one whole agent
// loop (e2e/testdata/wire-*.mjs): the SDK asks a fake model API (an
// httptest server here, the one thing that cannot be real) and gets tool
// calls, the script posts them as the SDK returned them to a real
// `orchestrator serve` (embedded JetStream, in-process workers, demo
// tools), appends the pool's answer as it is, and asks again. The fake
// checks that second request: the tool outputs the SDK sent carry the
// pool's results under the right call ids, the error in each API's own
// convention. Bad bodies of the new shapes are refused with a 400 that says
// what was expected.
func TestModelSDKsLoopThroughThePool(t *testing.T) {
	t.Parallel()
	node, scripts := wireScripts(t)
	pool := startWireServe(t)
	t.Run("bad inputs", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct{ query, body, want string }{
			{"?format=gemini", `{"object":"response","output":[{"type":"function_call","call_id":"call_1","name":"echo","arguments":"{}"}]}`,
				"?format=gemini expects a Gemini Content"},
			{"?format=responses", `{"role":"model","parts":[{"functionCall":{"name":"echo","args":{}}}]}`,
				"the body looks like a Gemini Content"},
			{"", `{"object":"response","output":[{"type":"function_call","name":"echo","arguments":"{}"}]}`, "output[0].call_id: missing"},
			{"", `{"role":"model","parts":[{"functionCall":{"args":{}}}]}`, "parts[0].functionCall.name: missing"},
			{"", `{"role":"model","parts":[{"functionCall":{"name":"echo","args":"{}"}}]}`, "parts[0].functionCall.args: must be an object"},
		} {
			resp, err := http.Post(pool+"/v1/tool_calls"+c.query, "application/json", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), c.want) {
				t.Errorf("%s %s: %d %s; want 400 saying %q", c.query, c.body, resp.StatusCode, body, c.want)
			}
		}
	})
	for _, sdk := range []struct {
		name, script string
		fake         func(t *testing.T) *fakeModel
	}{
		{"anthropic", "wire-anthropic.mjs", fakeAnthropic},
		{"openai-chat", "wire-openai-chat.mjs", fakeOpenAIChat},
		{"openai-responses", "wire-openai-responses.mjs", fakeOpenAIResponses},
		{"gemini", "wire-gemini.mjs", fakeGemini},
	} {
		t.Run(sdk.name, func(t *testing.T) {
			t.Parallel()
			fake := sdk.fake(t)
			srv := httptest.NewServer(fake)
			t.Cleanup(srv.Close)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, filepath.Join(scripts, sdk.script), pool, srv.URL)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s failed: %v\nstderr: %s", sdk.script, err, stderr.String())
			}
			var got struct {
				Final string `json:"final"`
				Turns []struct {
					Format string `json:"format"`
					Errors string `json:"errors"`
				} `json:"turns"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%s printed %q: %v", sdk.script, out, err)
			}
			if n := fake.served(); n != 2 {
				t.Fatalf("the model API got %d requests, want 2 (the tool calls, then their results)", n)
			}
			if got.Final != "done" || len(got.Turns) != 1 || got.Turns[0].Format != fake.format || got.Turns[0].Errors != "1" {
				t.Errorf("loop %+v; want final text done after one turn in format %s with the error at 1", got, fake.format)
			}
		})
	}
}

// wireScripts finds node and the SDKs e2e/package-lock.json pins
// (testdeps.NodeModules installs them when missing), and returns the
// scripts' directory.
func wireScripts(t *testing.T) (node, dir string) {
	t.Helper()
	node, modules := testdeps.NodeModules(t)
	for _, pkg := range []string{"@anthropic-ai/sdk", "openai", "@google/genai"} {
		if _, err := os.Stat(filepath.Join(modules, pkg, "package.json")); err != nil {
			t.Fatalf("the SDK %s is not in e2e/node_modules: %v", pkg, err)
		}
	}
	return node, filepath.Join(filepath.Dir(modules), "testdata")
}

// startWireServe starts `orchestrator serve` with the demo tools and
// returns its HTTP API's base URL once echo and flaky are listed.
func startWireServe(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	addr := natstest.FreeAddr(t)
	serve := proctest.Start(t, orchestratorBin, "serve",
		"--data-dir", filepath.Join(tmp, "data"), "--nats-listen", natstest.FreeAddr(t), "--http", addr,
		"--workspace", filepath.Join(tmp, "ws"), "--workers", "1", "--drain-timeout", "5s")
	base := "http://" + addr
	client := &http.Client{Timeout: 2 * time.Second}
	serve.Eventually(waitLong, "serve to list echo and flaky", func() bool {
		resp, err := client.Get(base + "/v1/tools")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"name":"echo"`) && strings.Contains(string(body), `"name":"flaky"`)
	})
	return base
}

// fakeModel is a model API that answers its first request with canned
// tool calls (echo, then a flaky that fails with a 404) and checks the
// second: the request must carry the tool results.
type fakeModel struct {
	t      *testing.T
	format string                  // the pool's format for this API
	path   string                  // the request path, matched by suffix
	first  func(body []byte) error // checks the first request (the tools)
	calls  string                  // the first answer
	check  func(body []byte) error // checks the second request (the results)
	final  string                  // the second answer

	mu sync.Mutex
	n  int
}

func (f *fakeModel) served() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.n++
	n := f.n
	f.mu.Unlock()
	refuse := func(err error) {
		f.t.Errorf("request %d %s: %v\nbody: %s", n, r.URL.Path, err, body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprintf(w, `{"error":{"type":"invalid_request_error","message":%q}}`, err.Error())
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, f.path) {
		refuse(fmt.Errorf("want POST …%s", f.path))
		return
	}
	answer := f.calls
	switch n {
	case 1:
		if err := f.first(body); err != nil {
			refuse(err)
			return
		}
	case 2:
		if err := f.check(body); err != nil {
			refuse(err)
			return
		}
		answer = f.final
	default:
		refuse(fmt.Errorf("a request after the loop ended"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, answer)
}

// The tool calls every fake makes, and what their results must say.
const (
	echoText     = "hello through the pool"
	flaky404Text = "HTTP 404"
)

// toolNames checks that names holds echo and flaky: the SDK sent the
// pool's tools as the pool listed them.
func toolNames(names []string) error {
	if !slices.Contains(names, "echo") || !slices.Contains(names, "flaky") {
		return fmt.Errorf("tools %v: want the pool's echo and flaky", names)
	}
	return nil
}

func fakeAnthropic(t *testing.T) *fakeModel {
	okID, errID := newCallID(), newCallID()
	return &fakeModel{
		t: t, format: "anthropic", path: "/v1/messages",
		first: func(body []byte) error {
			var req struct {
				Tools []struct {
					Name        string          `json:"name"`
					InputSchema json.RawMessage `json:"input_schema"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				return err
			}
			var names []string
			for _, tl := range req.Tools {
				if len(tl.InputSchema) == 0 {
					return fmt.Errorf("tool %s without input_schema", tl.Name)
				}
				names = append(names, tl.Name)
			}
			return toolNames(names)
		},
		calls: `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","stop_reason":"tool_use","stop_sequence":null,
			"usage":{"input_tokens":1,"output_tokens":1},
			"content":[{"type":"text","text":"Calling."},
				{"type":"tool_use","id":"` + okID + `","name":"echo","input":{"text":"` + echoText + `"}},
				{"type":"tool_use","id":"` + errID + `","name":"flaky","input":{"fail":"404"}}]}`,
		check: func(body []byte) error {
			var req struct {
				Messages []struct {
					Role    string          `json:"role"`
					Content json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				return err
			}
			if len(req.Messages) != 3 || req.Messages[1].Role != "assistant" || req.Messages[2].Role != "user" {
				return fmt.Errorf("messages: want user, assistant, user")
			}
			var results []struct {
				Type      string `json:"type"`
				ToolUseID string `json:"tool_use_id"`
				IsError   bool   `json:"is_error"`
				Content   []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			}
			if err := json.Unmarshal(req.Messages[2].Content, &results); err != nil {
				return err
			}
			if len(results) != 2 || len(results[0].Content) != 1 || len(results[1].Content) != 1 {
				return fmt.Errorf("want two tool_result blocks of one text each")
			}
			r0, r1 := results[0], results[1]
			if r0.Type != "tool_result" || r0.ToolUseID != okID || r0.IsError || r0.Content[0].Text != echoText {
				return fmt.Errorf("echo's result %+v", r0)
			}
			if r1.Type != "tool_result" || r1.ToolUseID != errID || !r1.IsError || !strings.Contains(r1.Content[0].Text, flaky404Text) {
				return fmt.Errorf("flaky's result %+v: want is_error with the 404", r1)
			}
			return nil
		},
		final: `{"id":"msg_2","type":"message","role":"assistant","model":"claude-test","stop_reason":"end_turn","stop_sequence":null,
			"usage":{"input_tokens":1,"output_tokens":1},"content":[{"type":"text","text":"done"}]}`,
	}
}

// openAICallID is a call id as OpenAI makes them, unique in the test binary.
func openAICallID() string { return "call_" + strings.TrimPrefix(newCallID(), "toolu_") }

// openAITools checks a Chat Completions or Responses tools list.
func openAITools(body []byte, nested bool) error {
	var req struct {
		Tools []struct {
			Type     string          `json:"type"`
			Name     string          `json:"name"`
			Params   json.RawMessage `json:"parameters"`
			Function *struct {
				Name   string          `json:"name"`
				Params json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	var names []string
	for _, tl := range req.Tools {
		name, params := tl.Name, tl.Params
		if nested {
			if tl.Function == nil {
				return fmt.Errorf("tool without function")
			}
			name, params = tl.Function.Name, tl.Function.Params
		}
		if tl.Type != "function" || len(params) == 0 {
			return fmt.Errorf("tool %s: type %q, parameters %s", name, tl.Type, params)
		}
		names = append(names, name)
	}
	return toolNames(names)
}

func fakeOpenAIChat(t *testing.T) *fakeModel {
	okID, errID := openAICallID(), openAICallID()
	return &fakeModel{
		t: t, format: "openai", path: "/v1/chat/completions",
		first: func(body []byte) error { return openAITools(body, true) },
		calls: `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test",
			"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[
				{"id":"` + okID + `","type":"function","function":{"name":"echo","arguments":"{\"text\":\"` + echoText + `\"}"}},
				{"id":"` + errID + `","type":"function","function":{"name":"flaky","arguments":"{\"fail\":\"404\"}"}}]}}]}`,
		check: func(body []byte) error {
			var req struct {
				Messages []struct {
					Role       string `json:"role"`
					ToolCallID string `json:"tool_call_id"`
					Content    any    `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				return err
			}
			m := req.Messages
			if len(m) != 4 || m[1].Role != "assistant" || m[2].Role != "tool" || m[3].Role != "tool" {
				return fmt.Errorf("messages: want user, assistant, tool, tool")
			}
			if m[2].ToolCallID != okID || m[2].Content != echoText {
				return fmt.Errorf("echo's tool message %+v", m[2])
			}
			if text, _ := m[3].Content.(string); m[3].ToolCallID != errID || !strings.HasPrefix(text, "Error: ") || !strings.Contains(text, flaky404Text) {
				return fmt.Errorf("flaky's tool message %+v: want Error: and the 404", m[3])
			}
			return nil
		},
		final: `{"id":"chatcmpl-2","object":"chat.completion","created":1,"model":"gpt-test",
			"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"done","refusal":null}}]}`,
	}
}

func fakeOpenAIResponses(t *testing.T) *fakeModel {
	okID, errID := openAICallID(), openAICallID()
	return &fakeModel{
		t: t, format: "responses", path: "/v1/responses",
		first: func(body []byte) error { return openAITools(body, false) },
		calls: `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-test","output":[
				{"type":"reasoning","id":"rs_1","summary":[]},
				{"type":"function_call","id":"fc_1","call_id":"` + okID + `","name":"echo","arguments":"{\"text\":\"` + echoText + `\"}","status":"completed"},
				{"type":"function_call","id":"fc_2","call_id":"` + errID + `","name":"flaky","arguments":"{\"fail\":\"404\"}","status":"completed"}]}`,
		check: func(body []byte) error {
			var req struct {
				Input []struct {
					Type   string `json:"type"`
					CallID string `json:"call_id"`
					Output any    `json:"output"`
				} `json:"input"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				return err
			}
			in := req.Input
			// The user message, the response's three output items, the two outputs.
			if len(in) != 6 || in[2].Type != "function_call" || in[4].Type != "function_call_output" || in[5].Type != "function_call_output" {
				return fmt.Errorf("input: want the message, the output items and two function_call_output items")
			}
			if in[4].CallID != okID || in[4].Output != echoText {
				return fmt.Errorf("echo's output %+v", in[4])
			}
			if text, _ := in[5].Output.(string); in[5].CallID != errID || !strings.HasPrefix(text, "Error: ") || !strings.Contains(text, flaky404Text) {
				return fmt.Errorf("flaky's output %+v: want Error: and the 404", in[5])
			}
			return nil
		},
		final: `{"id":"resp_2","object":"response","created_at":1,"status":"completed","model":"gpt-test","output":[
				{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"done","annotations":[]}]}]}`,
	}
}

// The Gemini fake's echo call has an id, its flaky call none (Gemini's
// ids are optional): the pool answers the first with its id and the
// second without.
func fakeGemini(t *testing.T) *fakeModel {
	okID := "g_" + strings.TrimPrefix(newCallID(), "toolu_")
	return &fakeModel{
		t: t, format: "gemini", path: ":generateContent",
		first: func(body []byte) error {
			var req struct {
				Tools []struct {
					FunctionDeclarations []struct {
						Name   string          `json:"name"`
						Schema json.RawMessage `json:"parametersJsonSchema"`
					} `json:"functionDeclarations"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				return err
			}
			if len(req.Tools) != 1 {
				return fmt.Errorf("want one Tool of functionDeclarations")
			}
			var names []string
			for _, d := range req.Tools[0].FunctionDeclarations {
				if !json.Valid(d.Schema) || !strings.Contains(string(d.Schema), `"type"`) {
					return fmt.Errorf("declaration %s: parametersJsonSchema %s", d.Name, d.Schema)
				}
				names = append(names, d.Name)
			}
			return toolNames(names)
		},
		calls: `{"responseId":"resp-` + okID + `","modelVersion":"gemini-test","candidates":[{"index":0,"finishReason":"STOP","content":{"role":"model","parts":[
				{"text":"Calling."},
				{"functionCall":{"id":"` + okID + `","name":"echo","args":{"text":"` + echoText + `"}},"thoughtSignature":"c2lnbmF0dXJl"},
				{"functionCall":{"name":"flaky","args":{"fail":"404"}}}]}}],
			"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1,"totalTokenCount":2}}`,
		check: func(body []byte) error {
			var req struct {
				Contents []struct {
					Role  string `json:"role"`
					Parts []struct {
						FunctionResponse *struct {
							ID       *string        `json:"id"`
							Name     string         `json:"name"`
							Response map[string]any `json:"response"`
						} `json:"functionResponse"`
					} `json:"parts"`
				} `json:"contents"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				return err
			}
			c := req.Contents
			if len(c) != 3 || c[1].Role != "model" || c[2].Role != "user" || len(c[2].Parts) != 2 ||
				c[2].Parts[0].FunctionResponse == nil || c[2].Parts[1].FunctionResponse == nil {
				return fmt.Errorf("contents: want user, model, user with two functionResponse parts")
			}
			r0, r1 := c[2].Parts[0].FunctionResponse, c[2].Parts[1].FunctionResponse
			if r0.ID == nil || *r0.ID != okID || r0.Name != "echo" || r0.Response["output"] != echoText || r0.Response["error"] != nil {
				return fmt.Errorf("echo's functionResponse %+v", r0)
			}
			text, _ := r1.Response["error"].(string)
			if r1.ID != nil || r1.Name != "flaky" || !strings.Contains(text, flaky404Text) || r1.Response["output"] != nil {
				return fmt.Errorf("flaky's functionResponse %+v: want no id and the 404 under error", r1)
			}
			return nil
		},
		final: `{"responseId":"resp-2","modelVersion":"gemini-test","candidates":[{"index":0,"finishReason":"STOP",
			"content":{"role":"model","parts":[{"text":"done"}]}}]}`,
	}
}
