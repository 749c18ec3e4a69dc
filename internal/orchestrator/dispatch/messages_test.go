package dispatch

import (
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

func TestDeadlineResult(t *testing.T) {
	t.Parallel()
	r := deadlineResult("toolu_1", "echo", 30*time.Second)
	want := "The tool echo returned no result within 30s; it may still be running. Try again later or use a different approach."
	if got := r.Content.Text(); got != want || !r.IsError || r.Class != envelope.ClassTransient || r.Code != classify.CodeDeadline {
		t.Errorf("deadlineResult = %+v %q, want the text %q", r, got, want)
	}
}

func TestWithSentence(t *testing.T) {
	t.Parallel()
	img := envelope.Block{Type: "image", Raw: []byte(`{"type":"image"}`)}
	tests := []struct {
		name string
		in   envelope.Content
		want []string // text of each block
	}{
		{"one text block", envelope.Text("It failed."), []string{"It failed. Stop."}},
		{"text then image", envelope.Content{{Type: "text", Text: "A."}, img}, []string{"A. Stop.", ""}},
		{"image only", envelope.Content{img}, []string{"", "Stop."}},
		{"empty text", envelope.Text(""), []string{"Stop."}},
		{"no content", nil, []string{"Stop."}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := strings.Clone(tc.in.Text())
			out := withSentence(tc.in, "Stop.")
			if len(out) != len(tc.want) {
				t.Fatalf("got %d blocks, want %d", len(out), len(tc.want))
			}
			for i, w := range tc.want {
				if out[i].Text != w {
					t.Errorf("block %d text %q, want %q", i, out[i].Text, w)
				}
			}
			if tc.in.Text() != before {
				t.Error("the input content was modified")
			}
		})
	}
}
