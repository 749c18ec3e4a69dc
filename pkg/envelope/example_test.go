package envelope_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// A call travels from a tool_use block through the queue to a worker, and
// its result goes back to the model as a tool_result block.
func Example() {
	var toolUse envelope.ToolUseBlock
	_ = json.Unmarshal([]byte(`{"type":"tool_use","id":"toolu_01","name":"echo","input":{"text":"hi"}}`), &toolUse)

	// Orchestrator: build and encode the call.
	call := envelope.CallFromToolUse(toolUse)
	call.Session = "sess-1"
	call.ReplyTo = "orch-1"
	call.CreatedAt = time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	call.Deadline = call.CreatedAt.Add(2 * time.Minute)
	data, err := envelope.EncodeCall(&call)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(data))

	// Worker: decode, run, answer.
	got, err := envelope.DecodeCall(data, envelope.Limits{})
	if err != nil {
		panic(err)
	}
	res := envelope.Result{CallID: got.ID, Tool: got.Tool, Content: envelope.Text("hi"), Attempts: 1}
	out, err := envelope.EncodeResult(&res)
	if err != nil {
		panic(err)
	}

	// Orchestrator: decode the result and hand it to the model.
	back, err := envelope.DecodeResult(out)
	if err != nil {
		panic(err)
	}
	block, _ := json.Marshal(back.ToolResult())
	fmt.Println(string(block))
	// Output:
	// {"v":1,"id":"toolu_01","tool":"echo","key":"ttczotjtatjw4axeijl4pukfio266qpo","session":"sess-1","reply_to":"orch-1","created_at":"2025-06-01T10:00:00Z","deadline":"2025-06-01T10:02:00Z","input":{"text":"hi"}}
	// {"type":"tool_result","tool_use_id":"toolu_01","content":[{"type":"text","text":"hi"}]}
}

// A bad envelope is refused with the field and the reason.
func ExampleDecodeCall_error() {
	_, err := envelope.DecodeCall([]byte(`{"v":1,"id":"toolu_01","tool":"echo","input":["hi"]}`), envelope.Limits{})
	var de *envelope.DecodeError
	if errors.As(err, &de) {
		fmt.Println(de.Field, errors.Is(err, envelope.ErrMalformed))
	}
	fmt.Println(err)
	// Output:
	// input true
	// envelope: field "input": must be a JSON object, not an array
}

// An error result says is_error in its tool_result; a success does not.
func ExampleResult_ToolResult() {
	res := envelope.Result{
		CallID:  "toolu_02",
		IsError: true,
		Class:   envelope.ClassPermanent,
		Code:    "not_found",
		Content: envelope.Text("There is no file notes.txt. List the directory to see which files exist."),
	}
	block, _ := json.Marshal(res.ToolResult())
	fmt.Println(string(block))
	// Output:
	// {"type":"tool_result","tool_use_id":"toolu_02","content":[{"type":"text","text":"There is no file notes.txt. List the directory to see which files exist."}],"is_error":true}
}

func ExampleTruncate() {
	big := strings.Repeat("x", 2_000_000) // a tool's output, far over the cap
	out := envelope.Truncate(big, 1000)
	fmt.Println(len(out))
	fmt.Println(out[strings.LastIndexByte(out, '\n')+1:])
	// Output:
	// 1000
	// [Output truncated: 1,999,136 of 2,000,000 bytes were left out. Ask for a smaller part, for example a narrower range or fewer results.]
}
