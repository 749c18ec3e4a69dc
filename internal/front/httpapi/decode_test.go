package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// FuzzDecoders holds decodeObject, decodeArray and decodeString to
// json.Unmarshal on every valid JSON value and on the members and elements
// inside it (what parseTurn hands them): the same values, nil and empty
// alike, and an error in the same cases.
func FuzzDecoders(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `null`, ` { "a" : 1 , "b":[1,2,{"c":"d"}] } `, `{"a":1,"a":2}`,
		`[1, "two", null, true, {"x":[]}, [[]]]`, `"plain"`, `"esc\"aped\n\u00e9\ud83d\ude00"`,
		`"bad \ud800 surrogate"`, "\"\xff\xfe bytes\"", `{"k\u00e9y":"v","\ud800":1}`, `12.5e3`, `-0`,
		`{"type":"tool_use","id":"toolu_01","name":"echo","input":{"text":"a"}}`, `false`, `[null]`,
		"{\"\xc3\xa9\":\"\xe2\x80\xa8\"}", `{"a":{"b":{"c":[{"d":null}]}}}`,
	} {
		f.Add(s)
	}
	for _, tc := range benchTurns {
		f.Add(tc.body)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		checkDecoders(t, []byte(s), 0)
	})
}

// checkDecoders compares the decoders with json.Unmarshal on raw and, to a
// few levels, on what is inside it.
func checkDecoders(t *testing.T, raw []byte, depth int) {
	t.Helper()
	var wantM map[string]json.RawMessage
	wantErr := json.Unmarshal(raw, &wantM)
	gotM, gotErr := decodeObject(raw)
	if (gotErr != nil) != (wantErr != nil) || !reflect.DeepEqual(gotM, wantM) {
		t.Fatalf("decodeObject(%q) = %q, %v; json.Unmarshal: %q, %v", raw, gotM, gotErr, wantM, wantErr)
	}
	var wantA []json.RawMessage
	wantErr = json.Unmarshal(raw, &wantA)
	gotA, gotErr := decodeArray(raw)
	if (gotErr != nil) != (wantErr != nil) || !reflect.DeepEqual(gotA, wantA) {
		t.Fatalf("decodeArray(%q) = %q, %v; json.Unmarshal: %q, %v", raw, gotA, gotErr, wantA, wantErr)
	}
	wantS, gotS := "unchanged", "unchanged"
	wantErr = json.Unmarshal(raw, &wantS)
	gotErr = decodeString(raw, &gotS)
	if (gotErr != nil) != (wantErr != nil) || gotS != wantS {
		t.Fatalf("decodeString(%q) = %q, %v; json.Unmarshal: %q, %v", raw, gotS, gotErr, wantS, wantErr)
	}
	if depth == 3 {
		return
	}
	for _, v := range gotM {
		if cap(v) != len(v) {
			t.Fatalf("decodeObject(%q): member %q has room to append into the body", raw, v)
		}
		checkDecoders(t, v, depth+1)
	}
	for _, v := range gotA {
		if cap(v) != len(v) {
			t.Fatalf("decodeArray(%q): element %q has room to append into the body", raw, v)
		}
		checkDecoders(t, v, depth+1)
	}
}

// TestDecodersMissing: a member that is absent (nil) is an error for
// objects, arrays and strings, as json.Unmarshal says of empty input.
func TestDecodersMissing(t *testing.T) {
	if m, err := decodeObject(nil); err == nil || m != nil {
		t.Errorf("decodeObject(nil) = %v, %v; want an error", m, err)
	}
	if a, err := decodeArray(nil); err == nil || a != nil {
		t.Errorf("decodeArray(nil) = %v, %v; want an error", a, err)
	}
	s := "kept"
	if err := decodeString(nil, &s); err == nil || s != "kept" {
		t.Errorf("decodeString(nil) = %q, %v; want an error and s kept", s, err)
	}
}

// FuzzAppendUserMessage holds UserMessage.appendJSON to the encoder the
// handler uses otherwise: the same bytes, whatever the strings.
func FuzzAppendUserMessage(f *testing.F) {
	f.Add("toolu_01", "done", "", false, false)
	f.Add("id\"\\<>&", "line\nbreak\t\u2028\u2029 <b>&amp;", "\x00\x1f", true, false)
	f.Add("\xff\xfe", "bad \xc3 utf8 é 😀", "second", false, true)
	f.Fuzz(func(t *testing.T, id, text, text2 string, isError, image bool) {
		content := envelope.Content{{Type: "text", Text: text}, {Type: "text", Text: text2}}
		if image {
			content = append(content, envelope.Block{Type: "image", Raw: json.RawMessage(`{"type": "image"}`)})
		}
		msg := UserMessage{Role: "user", Content: []envelope.ToolResultBlock{
			{Type: "tool_result", ToolUseID: id, Content: content, IsError: isError},
			{Type: "tool_result", ToolUseID: "b", Content: nil},
		}}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(msg); err != nil {
			t.Fatal(err)
		}
		got, ok := msg.appendJSON(nil)
		if want := !image && plainASCII(id); ok != want {
			t.Fatalf("appendJSON ok = %v for id %q and content %v, want %v", ok, id, content, want)
		}
		if ok && string(got) != want.String() {
			t.Fatalf("appendJSON:\n%s\nthe encoder:\n%s", got, want.String())
		}
	})
}
