package httpapi_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolpool/toolpool/internal/front/httpapi"
)

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// An agent on anthropic-sdk-go posts the assistant message as the SDK
// gives it and appends the answer to its messages: the answer must be a
// MessageParam the SDK reads without losing anything.
func TestAnthropicSDKShapes(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	okID, errID := uid("toolu_sdk_ok_"), uid("toolu_sdk_err_")
	// A Messages API response, as the SDK decodes it.
	var resp anthropic.Message
	if err := json.Unmarshal([]byte(`{
		"id":"msg_01","type":"message","role":"assistant","model":"claude-opus-4-6",
		"content":[
			{"type":"thinking","thinking":"Two tools.","signature":"c2ln"},
			{"type":"text","text":"Calling echo and flaky."},
			{"type":"tool_use","id":"`+okID+`","name":"echo","input":{"text":"from the SDK"}},
			{"type":"tool_use","id":"`+errID+`","name":"flaky","input":{"fail":"404"}}
		],
		"stop_reason":"tool_use","stop_sequence":null,
		"usage":{"input_tokens":10,"output_tokens":20}
	}`), &resp); err != nil {
		t.Fatal(err)
	}

	// Three ways an agent may send it: the param it appends to its
	// messages, the raw response JSON, and json.Marshal of the response.
	param, err := json.Marshal(resp.ToParam())
	if err != nil {
		t.Fatal(err)
	}
	marshalled, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{"ToParam": string(param), "RawJSON": resp.RawJSON(), "json.Marshal": string(marshalled)}
	var first []byte
	for name, body := range bodies {
		// Fresh ids per body would change the answer; the same ids are
		// answered from the dispatcher's cache, which is what an agent
		// retrying a turn gets.
		a := b.post(t, "", body, httpapi.HeaderSession, "sdk-"+name)
		if a.status != 200 {
			t.Fatalf("%s: status %d body %s", name, a.status, a.body)
		}
		if first == nil {
			first = a.body
		} else if !sameJSON(t, first, a.body) {
			t.Errorf("%s: answer %s differs from %s", name, a.body, first)
		}
	}

	var msg anthropic.MessageParam
	if err := json.Unmarshal(first, &msg); err != nil {
		t.Fatalf("MessageParam: %v", err)
	}
	if msg.OfUser == nil || msg.OfAssistant != nil || len(msg.OfUser.Content) != 2 {
		t.Fatalf("MessageParam from %s: not a user message with two blocks", first)
	}
	want := []struct {
		id     string
		isErr  bool
		prefix string
	}{
		{okID, false, "from the SDK"},
		{errID, true, "The tool flaky"},
	}
	for i, w := range want {
		tr := msg.OfUser.Content[i].OfToolResult
		if tr == nil {
			t.Fatalf("content[%d] is not a ToolResultBlockParam", i)
		}
		if tr.ToolUseID != w.id || tr.IsError.Valid() != w.isErr || tr.IsError.Value != w.isErr {
			t.Errorf("content[%d]: id %q is_error %v (set %v); want %q %v", i, tr.ToolUseID, tr.IsError.Value, tr.IsError.Valid(), w.id, w.isErr)
		}
		if len(tr.Content) != 1 || tr.Content[0].OfText == nil || !strings.HasPrefix(tr.Content[0].OfText.Text, w.prefix) {
			t.Errorf("content[%d]: content %+v, want one text block starting %q", i, tr.Content, w.prefix)
		}
		// Each block alone, as the SDK's ToolResultBlockParam.
		var raw struct {
			Content []json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(first, &raw); err != nil {
			t.Fatal(err)
		}
		var one anthropic.ToolResultBlockParam
		if err := json.Unmarshal(raw.Content[i], &one); err != nil {
			t.Fatalf("ToolResultBlockParam: %v", err)
		}
		back, err := json.Marshal(one)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, raw.Content[i], back) {
			t.Errorf("ToolResultBlockParam round trip lost something:\n got %s\nwant %s", back, raw.Content[i])
		}
	}
	// Nothing is lost: the SDK writes back exactly what the API answered.
	back, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, first, back) {
		t.Errorf("MessageParam round trip lost something:\n got %s\nwant %s", back, first)
	}
	// And the conversation the agent would send next is well formed.
	next := anthropic.MessageNewParams{
		Model: anthropic.ModelClaudeOpus4_6, MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("task")), resp.ToParam(), msg},
	}
	if _, err := json.Marshal(next); err != nil {
		t.Errorf("the next request does not encode: %v", err)
	}
}

// An agent on openai-go posts the assistant message and appends the tool
// messages of the answer: each must be a ChatCompletionToolMessageParam.
func TestOpenAISDKShapes(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	okID, badID, errID := uid("call_sdk_ok_"), uid("call_sdk_bad_"), uid("call_sdk_err_")
	var completion openai.ChatCompletion
	if err := json.Unmarshal([]byte(`{
		"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-x",
		"choices":[{"index":0,"finish_reason":"tool_calls","logprobs":null,"message":{
			"role":"assistant","content":null,"refusal":null,"annotations":[],
			"tool_calls":[
				{"id":"`+okID+`","type":"function","function":{"name":"echo","arguments":"{\"text\":\"from openai\"}"}},
				{"id":"`+badID+`","type":"function","function":{"name":"echo","arguments":"{\"text\":"}},
				{"id":"`+errID+`","type":"function","function":{"name":"flaky","arguments":"{\"fail\":\"404\"}"}}
			]}}],
		"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}
	}`), &completion); err != nil {
		t.Fatal(err)
	}
	m := completion.Choices[0].Message
	param, err := json.Marshal(m.ToParam())
	if err != nil {
		t.Fatal(err)
	}
	marshalled, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var first []byte
	for name, body := range map[string]string{"ToParam": string(param), "RawJSON": m.RawJSON(), "json.Marshal": string(marshalled)} {
		a := b.post(t, "", body)
		if a.status != 200 || a.header.Get(httpapi.HeaderFormat) != "openai" {
			t.Fatalf("%s: status %d format %q body %s", name, a.status, a.header.Get(httpapi.HeaderFormat), a.body)
		}
		if got := a.header.Get(httpapi.HeaderErrorIndexes); got != "1,2" {
			t.Errorf("%s: %s = %q, want 1,2", name, httpapi.HeaderErrorIndexes, got)
		}
		if first == nil {
			first = a.body
		} else if !sameJSON(t, first, a.body) {
			t.Errorf("%s: answer %s differs from %s", name, a.body, first)
		}
	}

	var msgs []openai.ChatCompletionMessageParamUnion
	if err := json.Unmarshal(first, &msgs); err != nil {
		t.Fatalf("[]ChatCompletionMessageParamUnion: %v", err)
	}
	want := []struct{ id, prefix string }{
		{okID, "from openai"},
		{badID, "Error: The arguments of this call to echo are not valid JSON"},
		{errID, "Error: The tool flaky"},
	}
	if len(msgs) != len(want) {
		t.Fatalf("%d messages in %s", len(msgs), first)
	}
	for i, w := range want {
		tm := msgs[i].OfTool
		if tm == nil {
			t.Fatalf("message %d is not a tool message: %s", i, first)
		}
		if tm.ToolCallID != w.id || !strings.HasPrefix(tm.Content.OfString.Value, w.prefix) {
			t.Errorf("message %d: %q %q; want %q and content starting %q", i, tm.ToolCallID, tm.Content.OfString.Value, w.id, w.prefix)
		}
	}
	back, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, first, back) {
		t.Errorf("round trip through openai-go lost something:\n got %s\nwant %s", back, first)
	}
	next := openai.ChatCompletionNewParams{Model: "gpt-x", Messages: append([]openai.ChatCompletionMessageParamUnion{m.ToParam()}, msgs...)}
	if _, err := json.Marshal(next); err != nil {
		t.Errorf("the next request does not encode: %v", err)
	}
}

// The tool lists decode into the SDKs' tool params and encode back the
// same.
func TestToolsSDKShapes(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	resp, err := http.Get(b.srv.URL + "/v1/tools")
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		Tools []anthropic.ToolUnionParam `json:"tools"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tr)
	resp.Body.Close()
	if err != nil || len(tr.Tools) != 3 {
		t.Fatalf("anthropic tools: %v (%d)", err, len(tr.Tools))
	}
	for _, tool := range tr.Tools {
		if tool.OfTool == nil || tool.OfTool.Name == "" || !tool.OfTool.Description.Valid() || tool.OfTool.InputSchema.Properties == nil {
			t.Errorf("tool %+v is not a complete ToolParam", tool.OfTool)
		}
	}

	resp, err = http.Get(b.srv.URL + "/v1/tools?format=openai")
	if err != nil {
		t.Fatal(err)
	}
	var ot []openai.ChatCompletionToolUnionParam
	err = json.NewDecoder(resp.Body).Decode(&ot)
	resp.Body.Close()
	if err != nil || len(ot) != 3 {
		t.Fatalf("openai tools: %v (%d)", err, len(ot))
	}
	for _, tool := range ot {
		if tool.OfFunction == nil || tool.OfFunction.Function.Name == "" || tool.OfFunction.Function.Parameters["type"] != "object" {
			t.Errorf("tool %+v is not a complete function tool", tool.OfFunction)
		}
	}
}

// An agent on openai-go's Responses API posts the response (its raw JSON,
// or its output items') and appends the answer to the next
// request's input: each item must be a function_call_output input item,
// and the tools a FunctionToolParam.
func TestResponsesSDKShapes(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	okID, errID := uid("call_rsdk_ok_"), uid("call_rsdk_err_")
	var resp responses.Response
	if err := json.Unmarshal([]byte(`{
		"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-x",
		"output":[
			{"type":"reasoning","id":"rs_1","summary":[]},
			{"type":"function_call","id":"fc_1","call_id":"`+okID+`","name":"echo","arguments":"{\"text\":\"from responses\"}","status":"completed"},
			{"type":"function_call","id":"fc_2","call_id":"`+errID+`","name":"flaky","arguments":"{\"fail\":\"404\"}","status":"completed"}
		],
		"parallel_tool_calls":true,"tool_choice":"auto","tools":[]
	}`), &resp); err != nil {
		t.Fatal(err)
	}
	// (json.Marshal of a decoded Response does not give its JSON back:
	// openai-go's unions, e.g. a function_call's arguments, have no
	// MarshalJSON. Agents in Go post RawJSON.)
	var output []string
	for _, item := range resp.Output {
		output = append(output, item.RawJSON())
	}
	var first []byte
	for name, body := range map[string]string{"RawJSON": resp.RawJSON(), "Output": "[" + strings.Join(output, ",") + "]"} {
		a := b.post(t, "", body)
		if a.status != 200 || a.header.Get(httpapi.HeaderFormat) != "responses" || a.header.Get(httpapi.HeaderErrorIndexes) != "1" {
			t.Fatalf("%s: status %d headers %v body %s", name, a.status, a.header, a.body)
		}
		if first == nil {
			first = a.body
		} else if !sameJSON(t, first, a.body) {
			t.Errorf("%s: answer %s differs from %s", name, a.body, first)
		}
	}
	var items responses.ResponseInputParam
	if err := json.Unmarshal(first, &items); err != nil || len(items) != 2 {
		t.Fatalf("ResponseInputParam from %s: %v", first, err)
	}
	for i, w := range []struct{ id, prefix string }{{okID, "from responses"}, {errID, "Error: The tool flaky"}} {
		out := items[i].OfFunctionCallOutput
		if out == nil || out.CallID.Value != w.id || !strings.HasPrefix(out.Output.OfString.Value, w.prefix) {
			t.Errorf("item %d = %+v; want a function_call_output for %s starting %q", i, out, w.id, w.prefix)
		}
	}
	back, err := json.Marshal(items)
	if err != nil || !sameJSON(t, first, back) {
		t.Errorf("round trip through openai-go lost something (%v):\n got %s\nwant %s", err, back, first)
	}

	r, err := http.Get(b.srv.URL + "/v1/tools?format=responses")
	if err != nil {
		t.Fatal(err)
	}
	var rt []responses.ToolUnionParam
	err = json.NewDecoder(r.Body).Decode(&rt)
	r.Body.Close()
	if err != nil || len(rt) != 3 {
		t.Fatalf("responses tools: %v (%d)", err, len(rt))
	}
	for _, tool := range rt {
		if f := tool.OfFunction; f == nil || f.Name == "" || f.Parameters["type"] != "object" || !f.Strict.Valid() || f.Strict.Value {
			t.Errorf("tool %+v is not a complete, non-strict function tool", tool.OfFunction)
		}
	}
}
