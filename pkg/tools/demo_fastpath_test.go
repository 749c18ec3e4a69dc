package tools_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// The diagnostic tools, echo above all (orchestrator bench loads it), are
// validated with the fast check, and a valid echo input costs no
// allocation. (Not parallel: it counts allocations.)
func TestDemoToolsTakeTheFastCheck(t *testing.T) {
	r := tools.NewRegistry()
	if err := demo.Register(r); err != nil {
		t.Fatal(err)
	}
	for _, name := range r.Names() {
		rt, _ := r.Lookup(name)
		if !tools.FastChecked(rt) {
			t.Errorf("%s: no fast check for its schema %s", name, rt.InputSchema)
		}
	}
	echo, ok := r.Lookup("echo")
	if !ok {
		t.Fatal("no echo tool")
	}
	input := json.RawMessage(`{"text":"` + strings.Repeat("x", 245) + `"}`)
	if err := echo.Validate(input); err != nil {
		t.Fatalf("Validate(%s) = %v", input, err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = echo.Validate(input) }); n != 0 {
		t.Errorf("Validate of a valid echo input allocates %v times per run, want 0", n)
	}
	for _, bad := range []string{`{}`, `{"text":1}`, `{"text":"a","more":true}`, `{"text":"a"`, `[]`} {
		if err := echo.Validate(json.RawMessage(bad)); err == nil {
			t.Errorf("Validate(%s) = nil, want an error", bad)
		}
	}
}
