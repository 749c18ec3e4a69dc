package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sampleCall is a call with every field set, including strings that need
// escaping and a time with a zone offset.
func sampleCall() *Call {
	created := time.Date(2025, 3, 4, 5, 6, 7, 891011121, time.FixedZone("", 5*3600+30*60))
	return &Call{
		ID:          "toolu_01A09q90qw90lq917835lq9",
		Tool:        "read_file",
		Input:       json.RawMessage(`{"path":"a \"b\".txt","range":[1,20],"note":"héllo\u2028"}`),
		Session:     "sess-1 \"quoted\" \\ back",
		ReplyTo:     "orch-1_eu",
		CreatedAt:   created,
		Deadline:    created.Add(90 * time.Second).UTC(),
		Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		OriginalID:  "toolu_0before",
	}
}

// equalCall compares calls field by field; times by instant.
func equalCall(t *testing.T, got, want *Call) {
	t.Helper()
	if got.V != want.V || got.ID != want.ID || got.Tool != want.Tool || got.Session != want.Session ||
		got.ReplyTo != want.ReplyTo || got.Traceparent != want.Traceparent || got.OriginalID != want.OriginalID {
		t.Errorf("call fields differ:\n got %+v\nwant %+v", got, want)
	}
	if !bytes.Equal(got.Input, want.Input) {
		t.Errorf("input = %s, want %s", got.Input, want.Input)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) || !got.Deadline.Equal(want.Deadline) {
		t.Errorf("times = %v, %v; want %v, %v", got.CreatedAt, got.Deadline, want.CreatedAt, want.Deadline)
	}
}

func TestCallRoundTrip(t *testing.T) {
	t.Parallel()
	c := sampleCall()
	data, err := EncodeCall(c)
	if err != nil {
		t.Fatal(err)
	}
	if c.V != Version {
		t.Errorf("EncodeCall left V = %d, want %d", c.V, Version)
	}
	got, err := DecodeCall(data, Limits{})
	if err != nil {
		t.Fatalf("DecodeCall(%s): %v", data, err)
	}
	equalCall(t, got, c)
	_, off := got.CreatedAt.Zone()
	if off != 5*3600+30*60 {
		t.Errorf("created_at offset = %d, want the original +05:30", off)
	}
}

// TestEncodeCallMatchesEncodingJSON checks the hand-written encoder against
// encoding/json on the same struct tags.
func TestEncodeCallMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]*Call{
		"full":    sampleCall(),
		"minimal": {ID: "x", Tool: "echo", Input: json.RawMessage(" {\n} ")},
		"escapes": {ID: "x", Tool: "t", Input: json.RawMessage(`{}`), Session: "<>&\u2028\u2029 \xff é"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mine, err := EncodeCall(c)
			if err != nil {
				t.Fatal(err)
			}
			std, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			var a, b map[string]any
			if err := json.Unmarshal(mine, &a); err != nil {
				t.Fatalf("EncodeCall wrote invalid JSON %s: %v", mine, err)
			}
			if err := json.Unmarshal(std, &b); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Errorf("EncodeCall = %s\njson.Marshal = %s", mine, std)
			}
		})
	}
}

func TestEncodeCallRefusesWhatDecodeRefuses(t *testing.T) {
	t.Parallel()
	ok := func() *Call { return &Call{ID: "a", Tool: "echo", Input: json.RawMessage(`{}`)} }
	tests := []struct {
		name  string
		edit  func(*Call)
		field string
	}{
		{"no id", func(c *Call) { c.ID = " " }, "id"},
		{"no tool", func(c *Call) { c.Tool = "" }, "tool"},
		{"bad tool", func(c *Call) { c.Tool = "read file" }, "tool"},
		{"nil input", func(c *Call) { c.Input = nil }, "input"},
		{"array input", func(c *Call) { c.Input = json.RawMessage(`[1]`) }, "input"},
		{"broken input", func(c *Call) { c.Input = json.RawMessage(`{"a":`) }, "input"},
		{"two objects", func(c *Call) { c.Input = json.RawMessage(`{}{}`) }, "input"},
		{"newline in id", func(c *Call) { c.ID = "a\r\nX-Evil: 1" }, "id"},
		{"wildcard reply_to", func(c *Call) { c.ReplyTo = "orch.>" }, "reply_to"},
		{"year out of range", func(c *Call) { c.Deadline = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := ok()
			tt.edit(c)
			data, err := EncodeCall(c)
			var de *DecodeError
			if !errors.As(err, &de) || de.Field != tt.field || !errors.Is(err, ErrMalformed) {
				t.Fatalf("EncodeCall = %s, %v; want a *DecodeError on field %q", data, err, tt.field)
			}
		})
	}
	if _, err := EncodeCall(nil); err == nil {
		t.Error("EncodeCall(nil) succeeded")
	}
}

func TestDecodeCallErrors(t *testing.T) {
	t.Parallel()
	big := `{"v":1,"id":"a","tool":"t","input":{"s":"` + strings.Repeat("x", 100) + `"}}`
	tests := []struct {
		name   string
		data   string
		lim    Limits
		field  string
		err    error
		reason string // substring
	}{
		{"empty", ``, Limits{}, "", ErrMalformed, "empty"},
		{"not JSON", `hello`, Limits{}, "", ErrMalformed, "not valid JSON"},
		{"truncated", `{"v":1,"id":"a"`, Limits{}, "", ErrMalformed, "not valid JSON"},
		{"trailing garbage", `{"v":1,"id":"a","tool":"t","input":{}} x`, Limits{}, "", ErrMalformed, "after top-level value"},
		{"two objects", `{"v":1,"id":"a","tool":"t","input":{}}{}`, Limits{}, "", ErrMalformed, "not valid JSON"},
		{"array", `[{"v":1}]`, Limits{}, "", ErrMalformed, "must be a JSON object, not an array"},
		{"string", `"call"`, Limits{}, "", ErrMalformed, "must be a JSON object"},
		{"missing v", `{"id":"a","tool":"t","input":{}}`, Limits{}, "v", ErrVersion, "missing"},
		{"null v", `{"v":null,"id":"a","tool":"t","input":{}}`, Limits{}, "v", ErrVersion, "missing"},
		{"v 2", `{"v":2,"id":"a","tool":"t","input":{}}`, Limits{}, "v", ErrVersion, "version 2 is not supported"},
		{"v 0", `{"v":0,"id":"a","tool":"t","input":{}}`, Limits{}, "v", ErrVersion, "version 0"},
		{"v string", `{"v":"1","id":"a","tool":"t","input":{}}`, Limits{}, "v", ErrVersion, "integer"},
		{"v float", `{"v":1.0,"id":"a","tool":"t","input":{}}`, Limits{}, "v", ErrVersion, "integer"},
		{"v huge", `{"v":99999999999999999999999,"id":"a","tool":"t","input":{}}`, Limits{}, "v", ErrVersion, "integer"},
		{"version before other errors", `{"v":3,"id":7}`, Limits{}, "v", ErrVersion, ""},
		{"missing id", `{"v":1,"tool":"t","input":{}}`, Limits{}, "id", ErrMalformed, "missing"},
		{"blank id", `{"v":1,"id":" \t","tool":"t","input":{}}`, Limits{}, "id", ErrMalformed, "missing"},
		{"id number", `{"v":1,"id":7,"tool":"t","input":{}}`, Limits{}, "id", ErrMalformed, "must be a string, not a number"},
		{"id with CR", `{"v":1,"id":"a\r\nb","tool":"t","input":{}}`, Limits{}, "id", ErrMalformed, "control"},
		{"key case matters", `{"v":1,"ID":"a","tool":"t","input":{}}`, Limits{}, "id", ErrMalformed, "missing"},
		{"duplicate id", `{"v":1,"id":"a","id":"b","tool":"t","input":{}}`, Limits{}, "id", ErrMalformed, "more than once"},
		{"escaped duplicate", `{"v":1,"id":"a","\u0069d":"b","tool":"t","input":{}}`, Limits{}, "id", ErrMalformed, "more than once"},
		{"missing tool", `{"v":1,"id":"a","input":{}}`, Limits{}, "tool", ErrMalformed, "missing"},
		{"blank tool", `{"v":1,"id":"a","tool":"  ","input":{}}`, Limits{}, "tool", ErrMalformed, "missing"},
		{"tool with space", `{"v":1,"id":"a","tool":"read file","input":{}}`, Limits{}, "tool", ErrMalformed, `"read file"`},
		{"tool with dot", `{"v":1,"id":"a","tool":"a.b","input":{}}`, Limits{}, "tool", ErrMalformed, "letters, digits"},
		{"tool non-ASCII", `{"v":1,"id":"a","tool":"lésen","input":{}}`, Limits{}, "tool", ErrMalformed, ""},
		{"tool 65", `{"v":1,"id":"a","tool":"` + strings.Repeat("a", 65) + `","input":{}}`, Limits{}, "tool", ErrMalformed, "1 to 64"},
		{"tool array", `{"v":1,"id":"a","tool":["t"],"input":{}}`, Limits{}, "tool", ErrMalformed, "not an array"},
		{"missing input", `{"v":1,"id":"a","tool":"t"}`, Limits{}, "input", ErrMalformed, "missing"},
		{"null input", `{"v":1,"id":"a","tool":"t","input":null}`, Limits{}, "input", ErrMalformed, "missing"},
		{"array input", `{"v":1,"id":"a","tool":"t","input":[1,2]}`, Limits{}, "input", ErrMalformed, "must be a JSON object, not an array"},
		{"string input", `{"v":1,"id":"a","tool":"t","input":"{}"}`, Limits{}, "input", ErrMalformed, "not a string"},
		{"number input", `{"v":1,"id":"a","tool":"t","input":3}`, Limits{}, "input", ErrMalformed, "not a number"},
		{"bool input", `{"v":1,"id":"a","tool":"t","input":true}`, Limits{}, "input", ErrMalformed, "not a boolean"},
		{"input too large", big, Limits{MaxInputBytes: 64}, "input", ErrTooLarge, "the limit is 64"},
		// The whole message is checked before parsing: the garbage is never read.
		{"message too large", "{" + strings.Repeat(" ", CallOverheadBytes+10) + "garbage", Limits{MaxInputBytes: 8}, "", ErrTooLarge, "the limit is 65,544"},
		{"bad created_at", `{"v":1,"id":"a","tool":"t","input":{},"created_at":"yesterday"}`, Limits{}, "created_at", ErrMalformed, "RFC 3339"},
		{"numeric deadline", `{"v":1,"id":"a","tool":"t","input":{},"deadline":1700000000}`, Limits{}, "deadline", ErrMalformed, "RFC 3339"},
		{"session object", `{"v":1,"id":"a","tool":"t","input":{},"session":{}}`, Limits{}, "session", ErrMalformed, "must be a string"},
		{"reply_to wildcard", `{"v":1,"id":"a","tool":"t","input":{},"reply_to":"*"}`, Limits{}, "reply_to", ErrMalformed, "NATS subject token"},
		{"reply_to space", `{"v":1,"id":"a","tool":"t","input":{},"reply_to":"a b"}`, Limits{}, "reply_to", ErrMalformed, "NATS subject token"},
		{"reply_to empty token", `{"v":1,"id":"a","tool":"t","input":{},"reply_to":"a..b"}`, Limits{}, "reply_to", ErrMalformed, "NATS subject token"},
		{"reply_to dotted", `{"v":1,"id":"a","tool":"t","input":{},"reply_to":"host.example"}`, Limits{}, "reply_to", ErrMalformed, "NATS subject token"},
		// A result published on tools.result.<5,000 bytes> exceeded the
		// server's control line and closed the worker's connection for good.
		{"reply_to too long", `{"v":1,"id":"a","tool":"t","input":{},"reply_to":"` + strings.Repeat("r", 5000) + `"}`, Limits{}, "reply_to", ErrMalformed, "5000 bytes"},
		{"reply_to one byte too long", `{"v":1,"id":"a","tool":"t","input":{},"reply_to":"` + strings.Repeat("r", 65) + `"}`, Limits{}, "reply_to", ErrMalformed, "NATS subject token"},
		{"id too long", `{"v":1,"id":"` + strings.Repeat("i", MaxIDBytes+1) + `","tool":"t","input":{}}`, Limits{}, "id", ErrMalformed, "the limit is 512"},
		{"original_id too long", `{"v":1,"id":"a","original_id":"` + strings.Repeat("i", MaxIDBytes+1) + `","tool":"t","input":{}}`, Limits{}, "original_id", ErrMalformed, "the limit is 512"},
		{"traceparent LF", `{"v":1,"id":"a","tool":"t","input":{},"traceparent":"00-\n"}`, Limits{}, "traceparent", ErrMalformed, "control"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := DecodeCall([]byte(tt.data), tt.lim)
			if err == nil {
				t.Fatalf("DecodeCall succeeded: %+v", c)
			}
			if c != nil {
				t.Errorf("DecodeCall returned a call with its error")
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v is not a *DecodeError", err, err)
			}
			if de.Field != tt.field {
				t.Errorf("Field = %q, want %q (%v)", de.Field, tt.field, err)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.err)
			}
			for _, s := range []error{ErrMalformed, ErrVersion, ErrTooLarge} {
				if s != tt.err && errors.Is(err, s) {
					t.Errorf("error %v also matches %v", err, s)
				}
			}
			if !strings.Contains(de.Reason, tt.reason) {
				t.Errorf("Reason = %q, want it to contain %q", de.Reason, tt.reason)
			}
		})
	}
}

func TestDecodeCallAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
		want Call
	}{
		{"minimal", `{"v":1,"id":"a","tool":"t","input":{}}`, Call{V: 1, ID: "a", Tool: "t", Input: json.RawMessage(`{}`)}},
		{"whitespace everywhere", " \n{ \"v\" : 1 ,\t\"id\":\"a\" , \"tool\" : \"t\", \"input\" : { \"k\" : [ 1 , 2 ] } }\r\n",
			Call{V: 1, ID: "a", Tool: "t", Input: json.RawMessage(`{ "k" : [ 1 , 2 ] }`)}},
		{"unknown fields ignored", `{"v":1,"future":{"x":[1,{"y":"}"}]},"id":"a","tool":"t","input":{},"priority":3}`,
			Call{V: 1, ID: "a", Tool: "t", Input: json.RawMessage(`{}`)}},
		{"null optional fields", `{"v":1,"id":"a","tool":"t","input":{},"session":null,"created_at":null,"reply_to":null}`,
			Call{V: 1, ID: "a", Tool: "t", Input: json.RawMessage(`{}`)}},
		{"escapes", `{"v":1,"id":"a\u00e9\"\\","tool":"t","session":"\ud83d\ude00 ok","input":{"q":"\"}\\"}}`,
			Call{V: 1, ID: "aé\"\\", Tool: "t", Session: "😀 ok", Input: json.RawMessage(`{"q":"\"}\\"}`)}},
		{"escaped key", `{"\u0076":1,"i\u0064":"a","tool":"t","input":{}}`, Call{V: 1, ID: "a", Tool: "t", Input: json.RawMessage(`{}`)}},
		{"invalid UTF-8 replaced", "{\"v\":1,\"id\":\"a\",\"tool\":\"t\",\"session\":\"x\xffy\",\"input\":{}}",
			Call{V: 1, ID: "a", Tool: "t", Session: "x\uFFFDy", Input: json.RawMessage(`{}`)}},
		{"longest reply_to", `{"v":1,"id":"a","tool":"t","reply_to":"` + strings.Repeat("r", 64) + `","input":{}}`,
			Call{V: 1, ID: "a", Tool: "t", ReplyTo: strings.Repeat("r", 64), Input: json.RawMessage(`{}`)}},
		{"tool charset", `{"v":1,"id":"a","tool":"Az09_-","input":{}}`, Call{V: 1, ID: "a", Tool: "Az09_-", Input: json.RawMessage(`{}`)}},
		{"times", `{"v":1,"id":"a","tool":"t","input":{},"created_at":"2025-01-02T03:04:05.5Z","deadline":"2025-01-02T04:04:05+01:00"}`,
			Call{V: 1, ID: "a", Tool: "t", Input: json.RawMessage(`{}`),
				CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 5e8, time.UTC), Deadline: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeCall([]byte(tt.data), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			equalCall(t, got, &tt.want)
		})
	}
}

func TestDecodeCallDefaultLimit(t *testing.T) {
	t.Parallel()
	input := func(n int) string { // a JSON object of exactly n bytes
		return `{"s":"` + strings.Repeat("x", n-8) + `"}`
	}
	msg := func(n int) []byte {
		return []byte(`{"v":1,"id":"a","tool":"t","input":` + input(n) + `}`)
	}
	if len(input(MaxInputBytesDefault)) != MaxInputBytesDefault {
		t.Fatal("test helper is off")
	}
	if _, err := DecodeCall(msg(MaxInputBytesDefault), Limits{}); err != nil {
		t.Errorf("input of exactly the default limit: %v", err)
	}
	_, err := DecodeCall(msg(MaxInputBytesDefault+1), Limits{})
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("input one byte over the default limit: %v, want ErrTooLarge", err)
	}
	if want := `envelope: field "input": is 1,048,577 bytes; the limit is 1,048,576`; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
	// A negative limit also means the default.
	if _, err := DecodeCall(msg(2000), Limits{MaxInputBytes: -1}); err != nil {
		t.Errorf("negative limit: %v", err)
	}
	// A limit near MaxInt must not overflow into refusing everything.
	if _, err := DecodeCall(msg(2000), Limits{MaxInputBytes: math.MaxInt}); err != nil {
		t.Errorf("MaxInt limit: %v", err)
	}
	c := sampleCall()
	if err := c.Validate(Limits{MaxInputBytes: 10}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Validate with a small limit = %v, want ErrTooLarge", err)
	}
	if err := c.Validate(Limits{}); err != nil {
		t.Errorf("Validate = %v", err)
	}
}

func TestDecodeCallDoesNotAlias(t *testing.T) {
	t.Parallel()
	data := []byte(`{"v":1,"id":"abc","tool":"echo","input":{"text":"hi"}}`)
	c, err := DecodeCall(data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 'z'
	}
	if c.ID != "abc" || c.Tool != "echo" || string(c.Input) != `{"text":"hi"}` {
		t.Errorf("call changed with its source buffer: %+v", c)
	}
}

// DecodeCallShared decodes as DecodeCall does, but its input is a slice of
// the message that cannot grow into the rest of it.
func TestDecodeCallShared(t *testing.T) {
	t.Parallel()
	data := []byte(`{"v":1,"id":"abc","tool":"echo","input":{"text":"hi"},"session":"s"}`)
	c, err := DecodeCallShared(data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := DecodeCall(data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	equalCall(t, c, want)
	if cap(c.Input) != len(c.Input) {
		t.Errorf("input has room to grow (len %d, cap %d): appending would overwrite the message", len(c.Input), cap(c.Input))
	}
	c.Input = append(c.Input, ' ')
	c.Input[0] = '['
	if !bytes.Contains(data, []byte(`"input":{"text":"hi"},"session"`)) {
		t.Errorf("appending to a copy of the input changed the message: %s", data)
	}
	c, err = DecodeCallShared(data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	data[bytes.Index(data, []byte(`"hi"`))+1] = 'H'
	for i := range bytes.Index(data, []byte(`"input"`)) {
		data[i] = 'z' // before the input: the string fields
	}
	if string(c.Input) != `{"text":"Hi"}` {
		t.Errorf("input = %s, want it to share the message", c.Input)
	}
	if c.ID != "abc" || c.Tool != "echo" || c.Session != "s" {
		t.Errorf("string fields changed with the message: %+v", c)
	}
	// Errors are DecodeCall's.
	for _, bad := range []string{`{"v":1,"id":"a","tool":"t","input":[]}`, `{"v":2}`, `x`} {
		_, err1 := DecodeCall([]byte(bad), Limits{})
		_, err2 := DecodeCallShared([]byte(bad), Limits{})
		if err1 == nil || err2 == nil || err1.Error() != err2.Error() {
			t.Errorf("%s: DecodeCall error %v, DecodeCallShared error %v", bad, err1, err2)
		}
	}
}

func TestDecodeErrorText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  *DecodeError
		want string
	}{
		{&DecodeError{Field: "input", Reason: "must be a JSON object", Err: ErrMalformed}, `envelope: field "input": must be a JSON object`},
		{&DecodeError{Reason: "message is 9 bytes; the limit is 8", Err: ErrTooLarge}, `envelope: message is 9 bytes; the limit is 8`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	_, err := DecodeCall([]byte(`{"v":1,"id":"a","tool":"t","input":[]}`), Limits{})
	if want := `envelope: field "input": must be a JSON object, not an array`; err == nil || err.Error() != want {
		t.Errorf("DecodeCall error = %v, want %s", err, want)
	}
}

func TestValidToolName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"a": true, "read_file": true, "web-search": true, "A9": true, strings.Repeat("x", 64): true,
		"": false, strings.Repeat("x", 65): false, "a b": false, "a.b": false, "é": false, "a\n": false, "a/b": false,
	} {
		if got := ValidToolName(name); got != want {
			t.Errorf("ValidToolName(%q) = %v, want %v", name, got, want)
		}
	}
}

// sampleResult is an error result with every field set and two blocks.
func sampleResult() *Result {
	return &Result{
		CallID: "toolu_1",
		Tool:   "web_search",
		Content: Content{
			{Type: "text", Text: "The search service did not answer within 10 s, 3 attempts.\nTry read_file."},
			{Type: "image", Raw: json.RawMessage(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0K"}}`)},
		},
		IsError:    true,
		Class:      ClassTransient,
		Code:       "timeout",
		Retryable:  true,
		RetryAfter: 2500 * time.Millisecond,
		Attempts:   3,
		WorkerID:   "worker-7",
		QueueWait:  12 * time.Millisecond,
		ExecTime:   10 * time.Second,
	}
}

func TestResultRoundTrip(t *testing.T) {
	t.Parallel()
	for name, r := range map[string]*Result{
		"error":   sampleResult(),
		"success": {CallID: "c", Content: Text("ok")},
		"empty":   {CallID: "c"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := EncodeResult(r)
			if err != nil {
				t.Fatal(err)
			}
			if r.V != Version {
				t.Errorf("EncodeResult left V = %d", r.V)
			}
			got, err := DecodeResult(data)
			if err != nil {
				t.Fatalf("DecodeResult(%s): %v", data, err)
			}
			want := *r
			if len(want.Content) == 0 {
				want.Content = nil
			}
			if !reflect.DeepEqual(got, &want) {
				t.Errorf("round trip:\n got %+v\nwant %+v\nwire %s", got, &want, data)
			}
			// The hand-written encoder agrees with encoding/json on the tags.
			std, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			var a, b map[string]any
			if err := json.Unmarshal(data, &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(std, &b); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Errorf("EncodeResult = %s\njson.Marshal = %s", data, std)
			}
		})
	}
}

func TestEncodeResultWire(t *testing.T) {
	t.Parallel()
	data, err := EncodeResult(&Result{CallID: "c", Content: Text("ok"), ExecTime: 1500})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"v":1,"call_id":"c","exec_time_ns":1500,"content":[{"type":"text","text":"ok"}]}`; string(data) != want {
		t.Errorf("EncodeResult = %s, want %s", data, want)
	}
	data, err = EncodeResult(&Result{CallID: "c", IsError: true, Class: ClassPermanent, Code: "not_found", Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"v":1,"call_id":"c","is_error":true,"class":"permanent","code":"not_found","attempts":1,"content":[]}`; string(data) != want {
		t.Errorf("EncodeResult = %s, want %s", data, want)
	}
	// Negative durations mean nothing and are written as 0 (left out).
	data, err = EncodeResult(&Result{CallID: "c", RetryAfter: -time.Second, Attempts: -1, QueueWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"v":1,"call_id":"c","content":[]}`; string(data) != want {
		t.Errorf("EncodeResult = %s, want %s", data, want)
	}
}

func TestEncodeResultRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		r     *Result
		field string
	}{
		{"nil", nil, ""},
		{"no call id", &Result{Content: Text("x")}, "call_id"},
		{"block without type", &Result{CallID: "c", Content: Content{{Text: "x"}}}, "content[0].type"},
		{"image without raw", &Result{CallID: "c", Content: Content{{Type: "text", Text: "a"}, {Type: "image"}}}, "content[1].raw"},
		{"raw not an object", &Result{CallID: "c", Content: Content{{Type: "image", Raw: json.RawMessage(`"x"`)}}}, "content[0].raw"},
		{"raw broken", &Result{CallID: "c", Content: Content{{Type: "image", Raw: json.RawMessage(`{"a"`)}}}, "content[0].raw"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data, err := EncodeResult(tt.r)
			var de *DecodeError
			if !errors.As(err, &de) || de.Field != tt.field || !errors.Is(err, ErrMalformed) {
				t.Fatalf("EncodeResult = %s, %v; want an error on field %q", data, err, tt.field)
			}
		})
	}
}

func TestDecodeResultErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		data   string
		field  string
		err    error
		reason string
	}{
		{"not JSON", `{"v":1,`, "", ErrMalformed, "not valid JSON"},
		{"trailing", `{"v":1,"call_id":"c"}]`, "", ErrMalformed, "not valid JSON"},
		{"array", `[]`, "", ErrMalformed, "JSON object"},
		{"missing v", `{"call_id":"c"}`, "v", ErrVersion, "missing"},
		{"v 2", `{"v":2,"call_id":"c"}`, "v", ErrVersion, "version 2"},
		{"missing call_id", `{"v":1,"content":"x"}`, "call_id", ErrMalformed, "missing"},
		{"blank call_id", `{"v":1,"call_id":" "}`, "call_id", ErrMalformed, "missing"},
		{"duplicate", `{"v":1,"call_id":"c","is_error":true,"is_error":false}`, "is_error", ErrMalformed, "more than once"},
		{"is_error string", `{"v":1,"call_id":"c","is_error":"true"}`, "is_error", ErrMalformed, "boolean"},
		{"negative duration", `{"v":1,"call_id":"c","exec_time_ns":-5}`, "exec_time_ns", ErrMalformed, "negative"},
		{"float duration", `{"v":1,"call_id":"c","queue_wait_ns":1.5}`, "queue_wait_ns", ErrMalformed, "whole number"},
		{"huge duration", `{"v":1,"call_id":"c","retry_after_ns":9223372036854775808}`, "retry_after_ns", ErrMalformed, "out of range"},
		{"attempts string", `{"v":1,"call_id":"c","attempts":"3"}`, "attempts", ErrMalformed, "whole number"},
		{"class number", `{"v":1,"call_id":"c","class":1}`, "class", ErrMalformed, "string"},
		{"content object", `{"v":1,"call_id":"c","content":{"type":"text"}}`, "content", ErrMalformed, "not an object"},
		{"content number", `{"v":1,"call_id":"c","content":1}`, "content", ErrMalformed, "not a number"},
		{"block not object", `{"v":1,"call_id":"c","content":["x"]}`, "content[0]", ErrMalformed, "not a string"},
		{"block without type", `{"v":1,"call_id":"c","content":[{"type":"text","text":"a"},{"text":"b"}]}`, "content[1].type", ErrMalformed, "missing"},
		{"block type number", `{"v":1,"call_id":"c","content":[{"type":3}]}`, "content[0].type", ErrMalformed, "must be a string"},
		{"text not string", `{"v":1,"call_id":"c","content":[{"type":"text","text":42}]}`, "content[0].text", ErrMalformed, "not a number"},
		{"text missing", `{"v":1,"call_id":"c","content":[{"type":"text"}]}`, "content[0].text", ErrMalformed, "missing"},
		{"text null", `{"v":1,"call_id":"c","content":[{"type":"text","text":null}]}`, "content[0].text", ErrMalformed, "not null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := DecodeResult([]byte(tt.data))
			if err == nil {
				t.Fatalf("DecodeResult succeeded: %+v", r)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v is not a *DecodeError", err, err)
			}
			if de.Field != tt.field || !errors.Is(err, tt.err) || !strings.Contains(de.Reason, tt.reason) {
				t.Errorf("error = %v (field %q); want field %q, %v, reason containing %q", err, de.Field, tt.field, tt.err, tt.reason)
			}
		})
	}
	big := make([]byte, MaxResultBytes+1)
	if _, err := DecodeResult(big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized result: %v, want ErrTooLarge", err)
	}
}

func TestDecodeResultAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
		want Result
	}{
		{"string content", `{"v":1,"call_id":"c","content":"hello"}`, Result{V: 1, CallID: "c", Content: Text("hello")}},
		{"empty string content", `{"v":1,"call_id":"c","content":""}`, Result{V: 1, CallID: "c"}},
		{"no content", `{"v":1,"call_id":"c"}`, Result{V: 1, CallID: "c"}},
		{"null content", `{"v":1,"call_id":"c","content":null}`, Result{V: 1, CallID: "c"}},
		{"empty array", `{"v":1,"call_id":"c","content":[ ]}`, Result{V: 1, CallID: "c"}},
		{"unknown fields and class", `{"v":1,"call_id":"c","class":"throttled","new":[1],"content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]}`,
			Result{V: 1, CallID: "c", Class: "throttled", Content: Text("a")}},
		{"machine fields", `{"v":1,"call_id":"c","is_error":true,"retryable":true,"class":"transient","code":"http_429","retry_after_ns":3000000000,"attempts":2,"worker_id":"w","queue_wait_ns":0,"exec_time_ns":7}`,
			Result{V: 1, CallID: "c", IsError: true, Retryable: true, Class: ClassTransient, Code: "http_429", RetryAfter: 3 * time.Second, Attempts: 2, WorkerID: "w", ExecTime: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeResult([]byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, &tt.want) {
				t.Errorf("DecodeResult = %+v, want %+v", got, &tt.want)
			}
		})
	}
}

func TestClassValid(t *testing.T) {
	t.Parallel()
	for _, c := range []Class{ClassNone, ClassValidation, ClassTransient, ClassPermanent, ClassInternal} {
		if !c.Valid() {
			t.Errorf("%q.Valid() = false", c)
		}
	}
	if Class("throttled").Valid() {
		t.Error(`"throttled".Valid() = true`)
	}
}

func TestLimitsWithDefaults(t *testing.T) {
	t.Parallel()
	if got := (Limits{}).WithDefaults(); got != DefaultLimits {
		t.Errorf("zero Limits.WithDefaults() = %+v, want %+v", got, DefaultLimits)
	}
	if got := (Limits{MaxInputBytes: 5, MaxContentBytes: -1}).WithDefaults(); got != (Limits{MaxInputBytes: 5, MaxContentBytes: MaxContentBytesDefault}) {
		t.Errorf("WithDefaults() = %+v", got)
	}
}

// AppendCall and AppendResult write what EncodeCall and EncodeResult write,
// after what dst holds, and leave dst as it was on error.
func TestAppendEncoders(t *testing.T) {
	t.Parallel()
	prefix := []byte("keep me")
	call, res := sampleCall(), sampleResult()
	wantCall, err := EncodeCall(call)
	if err != nil {
		t.Fatal(err)
	}
	wantRes, err := EncodeResult(res)
	if err != nil {
		t.Fatal(err)
	}
	got, err := AppendCall(bytes.Clone(prefix), call)
	if err != nil || !bytes.Equal(got, append(bytes.Clone(prefix), wantCall...)) {
		t.Errorf("AppendCall = %s, %v; want the prefix, then %s", got, err, wantCall)
	}
	got, err = AppendResult(bytes.Clone(prefix), res)
	if err != nil || !bytes.Equal(got, append(bytes.Clone(prefix), wantRes...)) {
		t.Errorf("AppendResult = %s, %v; want the prefix, then %s", got, err, wantRes)
	}

	bad := *call
	bad.Deadline = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // fails after much is written
	got, err = AppendCall(bytes.Clone(prefix), &bad)
	if !errors.Is(err, ErrMalformed) || !bytes.Equal(got, prefix) {
		t.Errorf("AppendCall of a bad call = %q, %v; want the prefix alone and an error", got, err)
	}
	if data, err := EncodeCall(&bad); data != nil || err == nil {
		t.Errorf("EncodeCall of a bad call = %q, %v; want nil and an error", data, err)
	}
	badRes := *res
	badRes.Content = Content{{Type: "text", Text: "fine"}, {Type: "image"}} // fails in the content
	got, err = AppendResult(bytes.Clone(prefix), &badRes)
	if !errors.Is(err, ErrMalformed) || !bytes.Equal(got, prefix) {
		t.Errorf("AppendResult of a bad result = %q, %v; want the prefix alone and an error", got, err)
	}
	if data, err := EncodeResult(&badRes); data != nil || err == nil {
		t.Errorf("EncodeResult of a bad result = %q, %v; want nil and an error", data, err)
	}
}

// With a buffer kept for reuse, encoding does not allocate. (Not parallel:
// it counts allocations.)
func TestAppendEncodersReuseBuffer(t *testing.T) {
	call, res := benchCall(), benchResult()
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() {
		buf, _ = AppendCall(buf[:0], call)
		buf, _ = AppendResult(buf[:0], res)
	}); n != 0 {
		t.Errorf("AppendCall and AppendResult into a reused buffer allocate %v times per run, want 0", n)
	}
}
