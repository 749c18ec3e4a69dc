package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"

	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// upper stands in for a *dispatch.Dispatcher: it answers each call with
// its input in upper case.
type upper struct{}

func (upper) Dispatch(_ context.Context, _ string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	out := make([]envelope.Result, len(calls))
	for i, c := range calls {
		out[i] = envelope.Result{CallID: c.ID, Content: envelope.Text(strings.ToUpper(string(c.Input)))}
	}
	return out, nil
}

func Example() {
	api, err := httpapi.New(httpapi.Config{
		Dispatcher:  upper{},
		Definitions: httpapi.RegistryDefinitions(tools.NewRegistry()),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(api)
	defer srv.Close()

	post := func(body string) {
		resp, err := srv.Client().Post(srv.URL+"/v1/tool_calls", "application/json", strings.NewReader(body))
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		fmt.Print(resp.StatusCode, " ", string(answer))
	}
	post(`{"role":"assistant","content":[{"type":"text","text":"Shouting."},{"type":"tool_use","id":"toolu_1","name":"shout","input":{"say":"hi"}}]}`)
	post(`{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"shout","arguments":"{\"say\":\"hi\"}"}}]}`)
	// Output:
	// 200 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"{\"SAY\":\"HI\"}"}]}]}
	// 200 [{"role":"tool","tool_call_id":"call_1","content":"{\"SAY\":\"HI\"}"}]
}
