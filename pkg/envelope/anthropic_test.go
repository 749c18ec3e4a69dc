package envelope

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestToolUseConversions(t *testing.T) {
	t.Parallel()
	// A tool_use block as the Messages API returns it.
	api := `{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"location":"San Francisco, CA","unit":"celsius"}}`
	var tu ToolUseBlock
	if err := json.Unmarshal([]byte(api), &tu); err != nil {
		t.Fatal(err)
	}
	c := CallFromToolUse(tu)
	if c.V != Version || c.ID != tu.ID || c.Tool != "get_weather" || string(c.Input) != `{"location":"San Francisco, CA","unit":"celsius"}` {
		t.Fatalf("CallFromToolUse = %+v", c)
	}
	c.Session, c.ReplyTo, c.Deadline = "s", "orch-1", time.Now().Add(time.Minute)
	if err := c.Validate(Limits{}); err != nil {
		t.Errorf("call from a valid tool_use does not validate: %v", err)
	}
	back, err := json.Marshal(c.ToolUse())
	if err != nil {
		t.Fatal(err)
	}
	if string(back) != api {
		t.Errorf("ToolUse() = %s, want %s", back, api)
	}
	empty := Call{ID: "x", Tool: "now"}
	if got := empty.ToolUse(); string(got.Input) != `{}` || got.Type != "tool_use" {
		t.Errorf("ToolUse() with no input = %+v, want input {}", got)
	}
}

func TestToolResultConversions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		r    Result
		want string
	}{
		{"success has no is_error", Result{CallID: "toolu_1", Content: Text("15 degrees"), Class: ClassNone, ExecTime: time.Second},
			`{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"15 degrees"}]}`},
		{"error has is_error true", Result{CallID: "toolu_2", IsError: true, Class: ClassPermanent, Code: "not_found", Content: Text("No file a.txt. List the directory first.")},
			`{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"No file a.txt. List the directory first."}],"is_error":true}`},
		{"no content is an empty array", Result{CallID: "toolu_3"},
			`{"type":"tool_result","tool_use_id":"toolu_3","content":[]}`},
		{"empty text blocks left out", Result{CallID: "toolu_4", Content: Content{{Type: "text"}, {Type: "image", Raw: json.RawMessage(`{"type":"image"}`)}, {Type: "text", Text: ""}}},
			`{"type":"tool_result","tool_use_id":"toolu_4","content":[{"type":"image"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			orig := append(Content(nil), tt.r.Content...)
			got, err := json.Marshal(tt.r.ToolResult())
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("tool_result = %s\nwant          %s", got, tt.want)
			}
			if strings.Contains(string(got), "is_error") != tt.r.IsError {
				t.Errorf("is_error present = %v, want %v", !tt.r.IsError, tt.r.IsError)
			}
			if !reflect.DeepEqual(tt.r.Content, orig) {
				t.Errorf("ToolResult modified the result's content")
			}
		})
	}
}

func TestResultFromToolResult(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		api  string
		want Result
	}{
		{`{"type":"tool_result","tool_use_id":"toolu_1","content":"plain string"}`, Result{V: 1, CallID: "toolu_1", Content: Text("plain string")}},
		{`{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"boom"}],"is_error":true}`, Result{V: 1, CallID: "toolu_2", IsError: true, Content: Text("boom")}},
		{`{"type":"tool_result","tool_use_id":"toolu_3"}`, Result{V: 1, CallID: "toolu_3"}},
	} {
		var b ToolResultBlock
		if err := json.Unmarshal([]byte(tt.api), &b); err != nil {
			t.Fatalf("%s: %v", tt.api, err)
		}
		if got := ResultFromToolResult(b); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ResultFromToolResult(%s) = %+v, want %+v", tt.api, got, tt.want)
		}
	}
	// Result → tool_result → Result keeps what a tool_result carries.
	r := sampleResult()
	back := ResultFromToolResult(r.ToolResult())
	if back.CallID != r.CallID || back.IsError != r.IsError || !reflect.DeepEqual(back.Content, r.Content) {
		t.Errorf("round trip through tool_result = %+v", back)
	}
}
