package catalog_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolpool/toolpool/internal/worker/catalog"
	"github.com/toolpool/toolpool/pkg/tools"
)

func ExampleParse() {
	_, err := catalog.Parse("tools.yaml", []byte(`
tools:
  - name: weather
    description: Current weather for a city.
    input_schema: {type: object}
    retry: {max_attempts: 0}
    backend: webhook
    webhook: {url: "https://weather.example.com/now"}
`), catalog.Options{})
	fmt.Println(err)
	// Output: tools.yaml:6: tool "weather": retry.max_attempts: must be between 1 and 100, got 0
}

func ExampleFile_Apply() {
	f, err := catalog.Parse("tools.yaml", []byte(`
tools:
  - name: echo_json
    description: Returns its input as it received it.
    input_schema: {type: object}
    timeout: 5s
    backend: exec
    exec: {command: [cat]}
`), catalog.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := tools.NewRegistry()
	if err := f.Apply(reg, nil); err != nil {
		fmt.Println(err)
		return
	}
	rt, _ := reg.Lookup("echo_json")
	out, err := rt.Handler(context.Background(), json.RawMessage(`{"say":"hi"}`))
	fmt.Println(rt.Timeout, out.Content.Text(), err)
	// Output: 5s {"say":"hi"} <nil>
}
