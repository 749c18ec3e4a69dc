package tools_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolpool/toolpool/pkg/tools"
)

func TestProgressBounded(t *testing.T) {
	long := strings.Repeat("é", tools.MaxProgressMessageBytes) // 2 bytes each
	for _, tc := range []struct {
		name string
		in   tools.Progress
	}{
		{"long message", tools.Progress{Progress: 1, Message: long}},
		{"invalid utf-8", tools.Progress{Progress: 1, Message: "ok \xff\xfe"}},
		{"not finite", tools.Progress{Progress: math.NaN(), Total: math.Inf(1), Message: "x"}},
		{"small", tools.Progress{Progress: 2, Total: 3, Message: "two of three"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.Bounded()
			if len(got.Message) > tools.MaxProgressMessageBytes {
				t.Errorf("message is %d bytes, over %d", len(got.Message), tools.MaxProgressMessageBytes)
			}
			if !utf8.ValidString(got.Message) {
				t.Errorf("message %q is not valid UTF-8", got.Message)
			}
			if _, err := json.Marshal(got); err != nil {
				t.Errorf("json.Marshal(%+v): %v", got, err)
			}
			if len(tc.in.Message) > tools.MaxProgressMessageBytes && !strings.HasSuffix(got.Message, "…") {
				t.Errorf("a cut message should end with …, got ...%q", got.Message[len(got.Message)-8:])
			}
		})
	}
	small := tools.Progress{Progress: 2, Total: 3, Message: "two of three"}
	if got := small.Bounded(); got != small {
		t.Errorf("Bounded changed a small report: %+v", got)
	}
}
