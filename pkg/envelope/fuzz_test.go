package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// callSeeds are valid and tricky call envelopes for the fuzzers.
var callSeeds = []string{
	`{"v":1,"id":"toolu_01","tool":"echo","input":{"text":"hi"}}`,
	`{"v":1,"id":"toolu_01","tool":"read_file","input":{"path":"a.txt"},"session":"s","reply_to":"orch-1","created_at":"2025-01-02T03:04:05.123456789Z","deadline":"2025-01-02T03:06:05+02:00","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","original_id":"toolu_00"}`,
	`{"v":1,"id":"a\u0000","tool":"t","input":{}}`,
	`{"v":1,"id":"a","tool":"t","input":{"s":"\"}\\","n":[{"}":"]"}]}}`,
	`{"v":1,"id":"a","id":"b","tool":"t","input":{}}`,
	`{"\u0076":1,"i\u0064":"a","tool":"t","input":{}}`,
	`{"v":1.0,"id":"a","tool":"t","input":{}}`,
	`{"v":2,"id":"a","tool":"t","input":{}}`,
	`{"v":1,"id":"a","tool":"t","input":[]}`,
	`{"v":1,"id":"a","tool":"t","input":"{}"}`,
	`{"v":1,"id":"a","tool":"t","input":{}} trailing`,
	`{"v":1,"id":"a","tool":"t","input":{}}{}`,
	"{\"v\":1,\"id\":\"\xff\",\"tool\":\"t\",\"input\":{\"\xfe\":1}}",
	`{"v":1,"id":"a","tool":"t","input":{},"created_at":"0000-01-01T00:00:00-23:59"}`,
	`{"v":1,"id":"a","tool":"t","input":{},"reply_to":"a.b.c"}`,
	`{"v":-0,"id":"a","tool":"t","input":{}}`,
	`[]`, `null`, ``, `{`, `"`, `{"v":1,"id":"\ud800","tool":"t","input":{}}`,
}

func FuzzDecodeCall(f *testing.F) {
	for _, s := range callSeeds {
		f.Add([]byte(s))
	}
	lim := Limits{MaxInputBytes: 4096}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCall(data, lim)
		shared, sharedErr := DecodeCallShared(data, lim)
		if (err == nil) != (sharedErr == nil) || err != nil && err.Error() != sharedErr.Error() {
			t.Fatalf("DecodeCall error %v, DecodeCallShared error %v", err, sharedErr)
		}
		if err == nil && (!reflect.DeepEqual(c, shared) || cap(shared.Input) != len(shared.Input)) {
			t.Fatalf("DecodeCall and DecodeCallShared differ:\n%+v\n%+v", c, shared)
		}
		if err != nil {
			var de *DecodeError
			if c != nil || !errors.As(err, &de) || de.Reason == "" {
				t.Fatalf("DecodeCall error %v (%T) with call %v", err, err, c)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if len(c.Input) == 0 || c.Input[0] != '{' || !json.Valid(c.Input) || len(c.Input) > lim.MaxInputBytes {
			t.Fatalf("accepted input %q", c.Input)
		}
		if !ValidToolName(c.Tool) || strings.TrimSpace(c.ID) == "" || c.V != Version {
			t.Fatalf("accepted call %+v", c)
		}
		// Decode → encode → decode gives the same call, and encoding is stable.
		data2, err := EncodeCall(c)
		if err != nil {
			t.Fatalf("EncodeCall of a decoded call: %v\ncall %+v", err, c)
		}
		c2, err := DecodeCall(data2, lim)
		if err != nil {
			t.Fatalf("decode of re-encoded call: %v\n%s", err, data2)
		}
		if c2.ID != c.ID || c2.Tool != c.Tool || c2.Session != c.Session || c2.ReplyTo != c.ReplyTo ||
			c2.Traceparent != c.Traceparent || c2.OriginalID != c.OriginalID || !bytes.Equal(c2.Input, c.Input) ||
			!c2.CreatedAt.Equal(c.CreatedAt) || !c2.Deadline.Equal(c.Deadline) {
			t.Fatalf("round trip changed the call:\n%+v\n%+v", c, c2)
		}
		data3, err := EncodeCall(c2)
		if err != nil || !bytes.Equal(data2, data3) {
			t.Fatalf("encoding is not stable:\n%s\n%s (%v)", data2, data3, err)
		}
	})
}

func FuzzDecodeResult(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"call_id":"c","content":[{"type":"text","text":"ok"}]}`,
		`{"v":1,"call_id":"c","content":"plain"}`,
		`{"v":1,"call_id":"c","is_error":true,"class":"transient","code":"timeout","retryable":true,"retry_after_ns":1000,"attempts":3,"worker_id":"w","queue_wait_ns":5,"exec_time_ns":9,"content":[{"type":"image","source":{"type":"base64","data":"AA=="}},{"type":"text","text":"x"}]}`,
		`{"v":1,"call_id":"c","content":[{"type":"text"}]}`,
		`{"v":1,"call_id":"c","content":[{"type":"text","text":1}]}`,
		`{"v":1,"call_id":"c","content":[{"text":"x"}]}`,
		`{"v":1,"call_id":"c","content":[1,"a",null]}`,
		`{"v":1,"call_id":"c","attempts":-1}`,
		`{"v":1,"call_id":"c","exec_time_ns":1e3}`,
		`{"v":1,"call_id":"c","retry_after_ns":-9223372036854775808}`,
		`{"v":1,"call_id":"c"} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeResult(data)
		if err != nil {
			var de *DecodeError
			if r != nil || !errors.As(err, &de) {
				t.Fatalf("DecodeResult error %v (%T)", err, err)
			}
			return
		}
		if strings.TrimSpace(r.CallID) == "" || r.RetryAfter < 0 || r.QueueWait < 0 || r.ExecTime < 0 || r.Attempts < 0 {
			t.Fatalf("accepted result %+v", r)
		}
		data2, err := EncodeResult(r)
		if err != nil {
			t.Fatalf("EncodeResult of a decoded result: %v\n%+v", err, r)
		}
		r2, err := DecodeResult(data2)
		if err != nil {
			t.Fatalf("decode of re-encoded result: %v\n%s", err, data2)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip changed the result:\n%+v\n%+v", r, r2)
		}
	})
}

func FuzzTruncate(f *testing.F) {
	f.Add("hello world", 5)
	f.Add(strings.Repeat("日本語", 100), 150)
	f.Add(strings.Repeat("x", 1000), 12)
	f.Add("\xff\xfe\xfd", 2)
	f.Fuzz(func(t *testing.T, s string, max int) {
		got := Truncate(s, max)
		if max <= 0 {
			max = MaxContentBytesDefault
		}
		if len(s) <= max {
			if got != s {
				t.Fatalf("changed a text that fits")
			}
			return
		}
		if len(got) > max {
			t.Fatalf("Truncate(%d bytes, %d) = %d bytes", len(s), max, len(got))
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("cut inside a rune: %q", got)
		}
		c := Content{{Type: "text", Text: s}, {Type: "text", Text: s}}
		if cut := c.Truncate(max); cut.Size() > max {
			t.Fatalf("Content.Truncate size %d over %d", cut.Size(), max)
		}
	})
}
