package demo_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

func Example() {
	r := tools.NewRegistry()
	if err := demo.Register(r); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Names())

	// A worker validates the input, then runs the handler.
	echo, _ := r.Lookup("echo")
	input := json.RawMessage(`{"text": "hello"}`)
	if err := echo.Validate(input); err != nil {
		fmt.Println(err)
		return
	}
	out, err := echo.Handler(context.Background(), input)
	fmt.Println(out.Content.Text(), err)
	// Output:
	// [echo flaky sleep]
	// hello <nil>
}
