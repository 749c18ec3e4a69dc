package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/tools"
)

func Example() {
	r := tools.NewRegistry()
	err := r.Register(tools.Tool{
		Name:        "get_weather",
		Description: "Current weather for a city.",
		InputSchema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"city":  {"type": "string", "minLength": 1},
				"units": {"enum": ["metric", "imperial"]}
			},
			"required": ["city"]
		}`),
		Handler: func(ctx context.Context, input json.RawMessage) (tools.Output, error) {
			return tools.Text("12 °C"), nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	rt, _ := r.Lookup("get_weather")
	fmt.Println(rt.Validate(json.RawMessage(`{"city": "Oslo"}`)))

	err = rt.Validate(json.RawMessage(`{"units": "kelvin"}`))
	var ve *classify.ValidationError
	if errors.As(err, &ve) {
		for _, f := range ve.Fields {
			fmt.Printf("%s: %s\n", f.Path, f.Reason)
		}
	}
	// Output:
	// <nil>
	// city: is required
	// units: must be one of "metric", "imperial"
}

func ExampleRegistry_Register() {
	r := tools.NewRegistry()
	err := r.Register(tools.Tool{
		Name:        "search web",
		InputSchema: json.RawMessage(`{"type": "object"}`),
		Handler: func(context.Context, json.RawMessage) (tools.Output, error) {
			return tools.Output{}, nil
		},
	})
	fmt.Println(err)
	// Output:
	// tools: register "search web": name must match ^[a-zA-Z0-9_-]{1,64}$
}

func ExampleRegistry_Definitions() {
	r := tools.NewRegistry()
	r.MustRegister(tools.Tool{
		Name:        "read_file",
		Description: "Reads a text file from the workspace.",
		InputSchema: tools.ReadFileSchema,
		Handler: func(context.Context, json.RawMessage) (tools.Output, error) {
			return tools.Output{}, nil
		},
	})
	defs, _ := json.Marshal(r.Definitions())
	fmt.Println(string(defs)[:90])
	// Output:
	// [{"name":"read_file","description":"Reads a text file from the workspace.","input_schema":
}
