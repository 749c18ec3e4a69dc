package dispatch

import (
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/envelope"
)

func TestFormatWait(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{250 * time.Millisecond, "250ms"},
		{999 * time.Millisecond, "999ms"},
		{999*time.Millisecond + 900*time.Microsecond, "1s"},
		{9960 * time.Millisecond, "10s"},
		{59600 * time.Millisecond, "1m"},
		{time.Second, "1s"},
		{1500 * time.Millisecond, "1.5s"},
		{9949 * time.Millisecond, "9.9s"},
		{30 * time.Second, "30s"},
		{59*time.Second + 400*time.Millisecond, "59s"},
		{time.Minute, "1m"},
		{90 * time.Second, "1m30s"},
		{2 * time.Hour, "120m"},
	}
	for _, tc := range tests {
		if got := formatWait(tc.d); got != tc.want {
			t.Errorf("formatWait(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestDeadlineMessage(t *testing.T) {
	t.Parallel()
	got := DeadlineMessage("echo", 30*time.Second)
	want := "The tool echo returned no result within 30s; it may still be running. Try again later or use a different approach."
	if got != want {
		t.Errorf("DeadlineMessage = %q, want %q", got, want)
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
