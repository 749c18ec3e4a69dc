package demo_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// Outside a worker process, flaky refuses to crash: the call fails as a
// validation error the model can read, and the process lives on. (The
// crash itself is tested with real worker processes in pkg/dlq.)
func TestFlakyRefusesToCrashInProcess(t *testing.T) {
	t.Parallel()
	r := registry(t)
	rt := lookup(t, r, "flaky")
	input := json.RawMessage(`{"fail":"crash"}`)
	if err := rt.Validate(input); err != nil {
		t.Fatalf("crash is not a valid failure: %v", err)
	}
	_, err := rt.Handler(attempt(t.Context(), 1), input)
	var verr *classify.ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("flaky crash in process: %v, want a validation error", err)
	}
	d := classify.Classify(err)
	if d.Class != envelope.ClassValidation || !strings.Contains(d.Message(classify.MessageInput{Tool: "flaky"}), "own process") {
		t.Errorf("decision = %+v", d)
	}
	// Past its "times", flaky does not crash even where it could.
	out, err := demo.FlakyCrashing().Handler(attempt(t.Context(), 2), input)
	if err != nil || text(t, out) != "ok after 2 attempts" {
		t.Errorf("FlakyCrashing on attempt 2 = %v, %v", out, err)
	}
	r2 := tools.NewRegistry()
	if err := demo.RegisterWith(r2, demo.Options{AllowCrash: true}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r2.Names(), ","); got != "echo,flaky,sleep" {
		t.Errorf("RegisterWith registered %v", r2.Names())
	}
}
