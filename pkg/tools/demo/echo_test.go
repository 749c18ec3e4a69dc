package demo

import (
	"encoding/json"
	"testing"
)

// echoText reads what encoding/json reads, for every input it accepts, and
// leaves every other input (escapes, bad UTF-8, other members) to
// encoding/json.
func TestEchoTextMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		input string
		fast  bool // echoText reads it itself
	}{
		{`{"text":"hi"}`, true},
		{` { "text" : "hi" } `, true},
		{"{\n\t\"text\":\"\"\n}", true},
		{`{"text":"tab\there \"quoted\" \u00e9 \ud83d\ude00 \\"}`, false}, // escapes: encoding/json's
		{`{"text":"lone \ud800 surrogate"}`, false},
		{"{\"text\":\"bad \xff utf-8\"}", false},
		{"{\"text\":\"raw\ttab\"}", false}, // a control character: invalid JSON
		{`{"text":"héllo wörld"}`, true},
		{`{"text":5}`, false},
		{`{"text":"a","more":1}`, false},
		{`{"other":"a"}`, false},
		{`{"text":"a"} x`, false},
		{`{"text":"unterminated}`, false},
		{`["text"]`, false},
		{``, false},
		{`{"text":"a\x"}`, false},
	} {
		got, ok := echoText([]byte(tc.input))
		if ok != tc.fast {
			t.Errorf("echoText(%q): ok %v, want %v", tc.input, ok, tc.fast)
			continue
		}
		if !ok {
			continue
		}
		var in struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal([]byte(tc.input), &in); err != nil {
			t.Errorf("encoding/json refuses %q (%v), echoText read %q", tc.input, err, got)
			continue
		}
		if got != in.Text {
			t.Errorf("echoText(%q) = %q; encoding/json reads %q", tc.input, got, in.Text)
		}
	}
}

// FuzzEchoText: whatever echoText reads, encoding/json reads the same.
func FuzzEchoText(f *testing.F) {
	for _, s := range []string{`{"text":"hi"}`, `{"text":"a\nb\u0041"}`, `{ "text" : "" }`, `{"text":"\ud83d"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		got, ok := echoText(input)
		if !ok {
			return
		}
		var in struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(input, &in); err != nil {
			t.Fatalf("encoding/json refuses %q (%v), echoText read %q", input, err, got)
		}
		if got != in.Text {
			t.Fatalf("echoText(%q) = %q; encoding/json reads %q", input, got, in.Text)
		}
	})
}
