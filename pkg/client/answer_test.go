package client

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// FuzzDecodeAnswer holds decodeAnswer to json.Unmarshal into a
// userMessage: the same blocks, nil and empty alike, and an error in the
// same cases.
func FuzzDecodeAnswer(f *testing.F) {
	for _, s := range []string{
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"hi"}]}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"x"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}],"is_error":true}]}`,
		`{"role":"user","content":[]}`, `{"content":null}`, `{}`, `[]`, `null`, `"x"`,
		`{"content":[{"Type":"tool_result","TOOL_USE_ID":"b","Content":"text","Is_Error":true}]}`,
		`{"content":[{"type":"tool_result","tool_use_id":"c","content":"a string"}]}`,
		`{"content":[{"tool_use_id":"d","is_error":null,"extra":{"a":[1,2]}}],"content":[]}`,
		`{"content":[{"tool_use_id":"e\u00e9","type":"tool_\u0072esult","content":[{"type":"text","text":"\ud800"}]}]}`,
		`{"Content":[{"tool_use_id":"f"}],"content":[{"tool_use_id":"g"}]}`,
		"{\"content\":[{\"tool_use_id\":\"\xff\"}],\"r\xc3\xb4le\":1}",
		`{"content":[{"tool_use_id":"h","content":[{"type":"text"}],"is_error":false,"is_error":true}]}`,
		`{"content":[1]}`, `{"content":[{"content":[{"type":""}]}]}`, ` {"content" : [ { "type" : "tool_result" } ] } `,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want userMessage
		wantErr := json.Unmarshal([]byte(s), &want)
		got, gotErr := decodeAnswer([]byte(s))
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("decodeAnswer(%q): error %v; json.Unmarshal: %v", s, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(got, want.Content) {
			t.Fatalf("decodeAnswer(%q) = %#v; json.Unmarshal: %#v", s, got, want.Content)
		}
	})
}

// TestReadAnswer: the whole body, whatever its Content-Length says and
// however the reads come.
func TestReadAnswer(t *testing.T) {
	body := strings.Repeat("0123456789", 300)
	for _, cl := range []int64{-1, 0, 10, int64(len(body)), int64(len(body)) + 5} {
		for _, r := range []io.Reader{strings.NewReader(body), iotest.OneByteReader(strings.NewReader(body)), iotest.DataErrReader(strings.NewReader(body))} {
			got, err := readAnswer(&http.Response{ContentLength: cl, Body: io.NopCloser(r)})
			if err != nil || string(got) != body {
				t.Fatalf("Content-Length %d: %d bytes, %v; want %d bytes", cl, len(got), err, len(body))
			}
		}
	}
	_, err := readAnswer(&http.Response{ContentLength: -1, Body: io.NopCloser(iotest.ErrReader(io.ErrUnexpectedEOF))})
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("a failing body: %v, want io.ErrUnexpectedEOF", err)
	}
}

// TestReadAnswerClaimedLength: a Content-Length is only the server's
// claim. An answer that declares 200 MiB and sends a few bytes gets a
// buffer of at most 64 KiB, not of the declared size.
func TestReadAnswerClaimedLength(t *testing.T) {
	got, err := readAnswer(&http.Response{ContentLength: 200 << 20, Body: io.NopCloser(strings.NewReader("{}"))})
	if err != nil || string(got) != "{}" {
		t.Fatalf("readAnswer = %q, %v; want {}", got, err)
	}
	if cap(got) > 64<<10+1 {
		t.Errorf("an answer that claimed 200 MiB and sent 2 bytes got a buffer of %d bytes; want at most %d", cap(got), 64<<10+1)
	}
}

// FuzzEncodeCalls holds encodeCalls to json.Marshal: the same bytes, and
// an error in the same cases.
func FuzzEncodeCalls(f *testing.F) {
	f.Add("tool_use", "toolu_01", "echo", `{"text":"x"}`)
	f.Add("tool_use", "call 1", "echo", `{"a": 1}`)
	f.Add("tool_use", "a<b", "e&cho", `{"t":"<p>"}`)
	f.Add("tool_use", "id", "n", ``)
	f.Add("tool_use", "id", "n", `{"a":"\u2028é"}`)
	f.Add("tool_use", "id", "n", `{"a":[1,2,{"b":null}],"c":true}`)
	f.Add("tool_use", "id", "n", `{"a":`)
	f.Add("tool_use", "\xff", "\"", `"x"`)
	f.Fuzz(func(t *testing.T, typ, id, name, input string) {
		var in json.RawMessage
		if input != "" || len(id)%2 == 1 {
			in = json.RawMessage(input)
		}
		calls := []envelope.ToolUseBlock{{Type: typ, ID: id, Name: name, Input: in}, {Type: "tool_use", ID: "b", Name: "echo", Input: json.RawMessage(`{}`)}}
		want, wantErr := json.Marshal(calls)
		got, gotErr := encodeCalls(calls)
		if (gotErr != nil) != (wantErr != nil) || string(got) != string(want) {
			t.Fatalf("encodeCalls = %s, %v; json.Marshal: %s, %v", got, gotErr, want, wantErr)
		}
	})
}
