package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestCallKey(t *testing.T) {
	base := CallKey("t1", "s1", "call_0", "echo", []byte(`{"text": "first conversation"}`))
	if !ValidKey(base) {
		t.Fatalf("CallKey = %q: not a valid key", base)
	}
	same := []struct {
		name  string
		input string
	}{
		{"no whitespace", `{"text":"first conversation"}`},
		{"more whitespace", " {\n\t\"text\" :  \"first conversation\"\r\n} "},
	}
	for _, c := range same {
		if k := CallKey("t1", "s1", "call_0", "echo", []byte(c.input)); k != base {
			t.Errorf("%s: key %q; want %q (whitespace outside strings does not matter)", c.name, k, base)
		}
	}
	differ := []struct {
		name                      string
		tenant, session, id, tool string
		input                     string
	}{
		{"other input", "t1", "s1", "call_0", "echo", `{"text":"second conversation"}`},
		{"whitespace inside a string", "t1", "s1", "call_0", "echo", `{"text":"first  conversation"}`},
		{"other session", "t1", "s2", "call_0", "echo", `{"text":"first conversation"}`},
		{"other tenant", "t2", "s1", "call_0", "echo", `{"text":"first conversation"}`},
		{"no tenant", "", "s1", "call_0", "echo", `{"text":"first conversation"}`},
		{"other id", "t1", "s1", "call_1", "echo", `{"text":"first conversation"}`},
		{"other tool", "t1", "s1", "call_0", "sleep", `{"text":"first conversation"}`},
		// Fields are length-prefixed: moving a byte from one to the next
		// changes the key.
		{"shifted field", "t1s", "1", "call_0", "echo", `{"text":"first conversation"}`},
	}
	seen := map[string]string{base: "base"}
	for _, c := range differ {
		k := CallKey(c.tenant, c.session, c.id, c.tool, []byte(c.input))
		if prev, ok := seen[k]; ok {
			t.Errorf("%s: key %q equals the key of %s", c.name, k, prev)
		}
		seen[k] = c.name
	}
	if got := (&Call{Tenant: "t1", Session: "s1", ID: "call_0", Tool: "echo", Input: json.RawMessage(`{"text":"first conversation"}`)}).CallKey(); got != base {
		t.Errorf("Call.CallKey = %q; want %q", got, base)
	}
}

func TestAppendCompactMatchesJSONCompact(t *testing.T) {
	for _, in := range []string{
		`{}`, ` { "a" : [ 1 , 2 , { "b" : "x \" y" } ] , "c" : null } `,
		`{"s":"tab\tand \\\" quote\\\\"}`, "{\"u\":\"\\u00e9 é\", \"n\": -1.5e+3 }",
	} {
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(in)); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := appendCompact(nil, []byte(in)); string(got) != want.String() {
			t.Errorf("appendCompact(%s) = %s; want %s", in, got, want.String())
		}
	}
}

func TestValidKey(t *testing.T) {
	for _, k := range []string{"", "short", "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", "abcdefghijklmnopqrstuvwxyz23456.", "abcdefghijklmnopqrstuvwxyz2345678", "abcdefghijklmnopqrstuvwxyz234561"} {
		if ValidKey(k) {
			t.Errorf("ValidKey(%q) = true", k)
		}
	}
	if !ValidKey("abcdefghijklmnopqrstuvwxyz234567") {
		t.Error("ValidKey of a well-formed key = false")
	}
}

func TestCallCodecKey(t *testing.T) {
	c := &Call{ID: "call_0", Tool: "echo", Tenant: "acme", Session: "s1", Input: json.RawMessage(`{"text": "x"}`)}
	data, err := EncodeCall(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := CallKey("acme", "s1", "call_0", "echo", []byte(`{"text":"x"}`)); c.Key != want {
		t.Fatalf("EncodeCall set key %q; want %q", c.Key, want)
	}
	got, err := DecodeCall(data, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if got.Key != c.Key || got.Tenant != "acme" {
		t.Errorf("decoded key %q tenant %q; want %q, acme", got.Key, got.Tenant, c.Key)
	}

	// An envelope without a key (an older writer's) gets the key of its content.
	old := []byte(`{"v":1,"id":"call_0","tool":"echo","tenant":"acme","session":"s1","input":{"text":"x"}}`)
	got, err = DecodeCall(old, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if got.Key != c.Key {
		t.Errorf("derived key %q; want %q", got.Key, c.Key)
	}

	for _, bad := range []string{
		`{"v":1,"id":"call_0","tool":"echo","key":"call_0","input":{}}`,
		`{"v":1,"id":"call_0","tool":"echo","key":"tools.result.x.abcdefghijklmnopq","input":{}}`,
		`{"v":1,"id":"call_0","tool":"echo","key":7,"input":{}}`,
	} {
		_, err := DecodeCall([]byte(bad), DefaultLimits)
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != "key" {
			t.Errorf("DecodeCall(%s) = %v; want an error naming the key", bad, err)
		}
	}
	if _, err := EncodeCall(&Call{ID: "x", Tool: "echo", Key: "not a key", Input: json.RawMessage(`{}`)}); err == nil {
		t.Error("EncodeCall accepted a malformed key")
	}
	if _, err := EncodeCall(&Call{ID: "x", Tool: "echo", Tenant: "a\nb", Input: json.RawMessage(`{}`)}); err == nil {
		t.Error("EncodeCall accepted a tenant with a newline")
	}
}

func TestResultCodecKey(t *testing.T) {
	key := CallKey("", "", "call_0", "echo", []byte(`{}`))
	data, err := EncodeResult(&Result{CallID: "call_0", Key: key, Content: Text("ok")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeResult(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Key != key {
		t.Errorf("decoded result key %q; want %q", got.Key, key)
	}
	if _, err := DecodeResult([]byte(`{"v":1,"call_id":"c","key":"x.y"}`)); err == nil {
		t.Error("DecodeResult accepted a malformed key")
	}
	if _, err := EncodeResult(&Result{CallID: "c", Key: "*"}); err == nil {
		t.Error("EncodeResult accepted a malformed key")
	}
}

func BenchmarkCallKey(b *testing.B) {
	in := []byte(`{"text": "hello, world, this is a benchmark input of some length"}`)
	b.ReportAllocs()
	for b.Loop() {
		_ = CallKey("tenant", "session-1234", "toolu_01ABCDEFGHIJ", "echo", in)
	}
}

// A call whose key is not the key of its content would ride on another
// call's identity: its result is stored under that key, and the real call
// posted later is answered from it (issue 12: a forged tools.call message
// delivered its own text to another session's call). Decoding refuses it,
// and so does encoding.
func TestCallKeyMustMatchContent(t *testing.T) {
	victim := CallKey("acme", "victim", "call_0", "echo", []byte(`{"text":"real"}`))
	forged := `{"v":1,"id":"call_0","tool":"echo","key":"` + victim + `","tenant":"acme","session":"attacker","input":{"text":"forged"}}`
	for _, decode := range []func([]byte, Limits) (*Call, error){DecodeCall, DecodeCallShared} {
		c, err := decode([]byte(forged), DefaultLimits)
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != "key" || !errors.Is(err, ErrMalformed) {
			t.Fatalf("decoding a call with another call's key = %+v, %v; want a malformed error naming the key", c, err)
		}
	}
	c := &Call{ID: "call_0", Tool: "echo", Key: victim, Tenant: "acme", Session: "victim", Input: json.RawMessage(`{"text":"forged"}`)}
	if data, err := EncodeCall(c); err == nil {
		t.Errorf("EncodeCall wrote a call with another call's key: %s", data)
	}

	// The key of the same content with other white space is its own.
	same := `{"v":1,"id":"call_0","tool":"echo","key":"` + victim + `","tenant":"acme","session":"victim","input":{ "text" : "real" }}`
	if _, err := DecodeCall([]byte(same), DefaultLimits); err != nil {
		t.Errorf("DecodeCall refused a call whose key is its own: %v", err)
	}
}
