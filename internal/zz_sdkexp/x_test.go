package zz

import (
	"encoding/json"
	"fmt"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
)

func TestX(t *testing.T) {
	data := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}],"is_error":true},{"type":"tool_result","tool_use_id":"toolu_2","content":[]}]}`
	var m anthropic.MessageParam
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("user=%v asst=%v\n", m.OfUser != nil, m.OfAssistant != nil)
	if m.OfUser != nil {
		for _, c := range m.OfUser.Content {
			tr := c.OfToolResult
			fmt.Printf("tr=%v\n", tr != nil)
			if tr != nil {
				fmt.Printf("id=%s iserr=%v valid=%v content=%d\n", tr.ToolUseID, tr.IsError.Value, tr.IsError.Valid(), len(tr.Content))
				for _, cc := range tr.Content {
					fmt.Printf("  text=%v image=%v\n", cc.OfText, cc.OfImage != nil)
				}
			}
		}
	}
	out, _ := json.Marshal(m)
	fmt.Println(string(out))

	var tools []anthropic.ToolUnionParam
	if err := json.Unmarshal([]byte(`[{"name":"echo","description":"d","input_schema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}}]`), &tools); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("tool=%+v\n", tools[0].OfTool != nil)
	out, _ = json.Marshal(tools)
	fmt.Println(string(out))

	var om []openai.ChatCompletionMessageParamUnion
	if err := json.Unmarshal([]byte(`[{"role":"tool","tool_call_id":"call_1","content":"Error: x"}]`), &om); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("tool=%v\n", om[0].OfTool != nil)
	if om[0].OfTool != nil {
		fmt.Printf("id=%s content=%q\n", om[0].OfTool.ToolCallID, om[0].OfTool.Content.OfString.Value)
	}
	out, _ = json.Marshal(om)
	fmt.Println(string(out))

	var msg anthropic.Message
	json.Unmarshal([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-6","content":[{"type":"text","text":"let me"},{"type":"tool_use","id":"toolu_1","name":"echo","input":{"text":"hi"}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`), &msg)
	out, _ = json.Marshal(msg.ToParam())
	fmt.Println(string(out))
	out, _ = json.Marshal(msg)
	fmt.Println(string(out))
	var cm openai.ChatCompletionMessage
	json.Unmarshal([]byte(`{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"echo","arguments":"{\"text\":\"hi\"}"}}]}`), &cm)
	out, _ = json.Marshal(cm.ToParam())
	fmt.Println(string(out))
	out, _ = json.Marshal(cm)
	fmt.Println(string(out))
}
