package envelope

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func TestContentText(t *testing.T) {
	t.Parallel()
	img := Block{Type: "image", Raw: json.RawMessage(`{"type":"image"}`)}
	tests := []struct {
		name string
		c    Content
		want string
	}{
		{"nil", nil, ""},
		{"one", Text("hello"), "hello"},
		{"two joined", Content{{Type: "text", Text: "a"}, {Type: "text", Text: "b"}}, "a\nb"},
		{"image skipped", Content{img, {Type: "text", Text: "a"}, img, {Type: "text", Text: "b"}, {Type: "text", Text: "c"}}, "a\nb\nc"},
		{"only image", Content{img}, ""},
		{"empty text blocks", Content{{Type: "text"}, {Type: "text"}}, "\n"},
	}
	for _, tt := range tests {
		if got := tt.c.Text(); got != tt.want {
			t.Errorf("%s: Text() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestContentMarshal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		c    Content
		want string
	}{
		{"nil is an empty array", nil, `[]`},
		{"empty", Content{}, `[]`},
		{"text", Text("a\"b\n"), `[{"type":"text","text":"a\"b\n"}]`},
		{"raw kept verbatim", Content{{Type: "document", Raw: json.RawMessage(`{"type":"document","source":{"type":"text","data":"x"},"title":"T"}`)}},
			`[{"type":"document","source":{"type":"text","data":"x"},"title":"T"}]`},
		{"text ignores Raw", Content{{Type: "text", Text: "t", Raw: json.RawMessage(`{"junk":1}`)}}, `[{"type":"text","text":"t"}]`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.c)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("%s: json.Marshal = %s, want %s", tt.name, got, tt.want)
		}
		direct, err := tt.c.MarshalJSON()
		if err != nil || string(direct) != tt.want {
			t.Errorf("%s: MarshalJSON = %s, %v; want %s", tt.name, direct, err, tt.want)
		}
	}
	// Through encoding/json, bad blocks are errors too.
	if _, err := json.Marshal(Content{{Type: "image"}}); err == nil {
		t.Error("marshalling an image block without Raw succeeded")
	}
	if _, err := json.Marshal(Block{}); err == nil {
		t.Error("marshalling a block without a type succeeded")
	}
}

func TestContentUnmarshal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
		want Content
	}{
		{"string", `"plain"`, Text("plain")},
		{"escaped string", `"a\u0000\"b"`, Text("a\x00\"b")},
		{"null", `null`, nil},
		{"empty string", `""`, nil},
		{"empty array", ` [ ] `, nil},
		{"blocks", `[{"type":"text","text":"a"},{"text":"b","type":"text"}]`, Content{{Type: "text", Text: "a"}, {Type: "text", Text: "b"}}},
		{"image verbatim", `[ {"type": "image", "source": {"type":"url","url":"https://x/y.png"}} ]`,
			Content{{Type: "image", Raw: json.RawMessage(`{"type": "image", "source": {"type":"url","url":"https://x/y.png"}}`)}}},
	}
	for _, tt := range tests {
		var c Content
		if err := json.Unmarshal([]byte(tt.data), &c); err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(c, tt.want) {
			t.Errorf("%s: got %#v, want %#v", tt.name, c, tt.want)
		}
	}
	bad := []struct {
		data, field string
	}{
		{`[{"text":"x"}]`, "[0].type"},
		{`[{"type":""}]`, "[0].type"},
		{`[{"type":"text","text":"a"},{"type":"text","text":["x"]}]`, "[1].text"},
		{`[{"type":"text"}]`, "[0].text"},
		{`[1]`, "[0]"},
		{`{"type":"text","text":"x"}`, ""},
		{`5`, ""},
		{`[`, ""},
		{``, ""},
	}
	for _, tt := range bad {
		var c Content
		err := c.UnmarshalJSON([]byte(tt.data))
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != tt.field || !errors.Is(err, ErrMalformed) {
			t.Errorf("UnmarshalJSON(%s) = %v; want a *DecodeError on field %q", tt.data, err, tt.field)
		}
	}
	// Through encoding/json the error is ours too.
	var c Content
	err := json.Unmarshal([]byte(`[{"type":"text","text":1}]`), &c)
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Errorf("json.Unmarshal error %T %v is not a *DecodeError", err, err)
	}
}

// TestBlockRawRoundTrip checks that a non-text block leaves exactly as it
// came, through a result envelope and through encoding/json.
func TestBlockRawRoundTrip(t *testing.T) {
	t.Parallel()
	raw := `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="},"cache_control":{"type":"ephemeral"}}`
	data := []byte(`{"v":1,"call_id":"c","content":[` + raw + `,{"type":"text","text":"caption"}]}`)
	r, err := DecodeResult(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Content) != 2 || r.Content[0].Type != "image" || string(r.Content[0].Raw) != raw {
		t.Fatalf("decoded content = %#v", r.Content)
	}
	out, err := EncodeResult(r)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(data) {
		t.Errorf("re-encoded = %s\nwant        %s", out, data)
	}
	var b Block
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		t.Fatal(err)
	}
	again, err := json.Marshal(b)
	if err != nil || string(again) != raw {
		t.Errorf("Block round trip = %s, %v; want %s", again, err, raw)
	}
}

func TestBlockUnmarshal(t *testing.T) {
	t.Parallel()
	var b Block
	if err := json.Unmarshal([]byte(` {"type":"text","text":"hi","citations":[]} `), &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b, Block{Type: "text", Text: "hi"}) {
		t.Errorf("block = %#v", b)
	}
	for _, data := range []string{`{}`, `{"type":null}`, `{"type":"text","text":false}`, `[]`, `"text"`, `{"type":"text"`} {
		var b Block
		if err := b.UnmarshalJSON([]byte(data)); !errors.Is(err, ErrMalformed) {
			t.Errorf("UnmarshalJSON(%s) = %v, want ErrMalformed", data, err)
		}
	}
}
