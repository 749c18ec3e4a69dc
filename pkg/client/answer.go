package client

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/toolpool/toolpool/internal/infra/jsonwire"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// readAnswer reads an answer's body, at most maxAnswerBytes (what is
// beyond is not read), into a buffer sized by its Content-Length when the
// answer has one.
func readAnswer(resp *http.Response) ([]byte, error) {
	size := 512
	if cl := resp.ContentLength; cl >= 0 && cl < maxAnswerBytes {
		// One more byte: the read that finds the end. At most 64 KiB up
		// front: a Content-Length is only the server's claim, and a larger
		// answer grows the buffer as its bytes come.
		size = int(min(cl, 64<<10)) + 1
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := buf[len(buf):min(cap(buf), maxAnswerBytes)]
		n, err := resp.Body.Read(room)
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return buf, err
		case len(buf) == maxAnswerBytes:
			return buf, nil
		}
	}
}

// decodeAnswer decodes the answer to a POST /v1/tool_calls: what
// json.Unmarshal gives for a userMessage, read without reflection when the
// answer is as the API writes it (a "content" array of tool_result objects
// whose members are named exactly), and by json.Unmarshal otherwise.
func decodeAnswer(data []byte) ([]envelope.ToolResultBlock, error) {
	if jsonwire.Valid(data) {
		if blocks, ok := walkAnswer(data); ok {
			return blocks, nil
		}
	}
	var msg userMessage
	if err := json.Unmarshal(data, &msg); err != nil {
		return nil, err
	}
	return msg.Content, nil
}

// walkAnswer reads a valid answer; ok is false when it is not as the API
// writes it, and json.Unmarshal must say what it is.
func walkAnswer(data []byte) (blocks []envelope.ToolResultBlock, ok bool) {
	start, end := jsonwire.Trim(data)
	seen := false
	ok = eachMember(data[start:end], func(name string, v []byte) bool {
		switch {
		case name == "content" && !seen:
			seen = true
			blocks, ok = walkResults(v)
			return ok
		case name == "content":
			return false // twice: encoding/json's way of reusing the slice is its own
		case strings.EqualFold(name, "content"):
			return false // encoding/json would match it: let it
		}
		return true
	})
	return blocks, ok
}

// walkResults reads the array of tool_result blocks v.
func walkResults(v []byte) (_ []envelope.ToolResultBlock, ok bool) {
	if len(v) == 0 || v[0] != '[' {
		return nil, false
	}
	blocks := []envelope.ToolResultBlock{}
	i := jsonwire.SkipSpace(v, 1)
	if i < len(v) && v[i] == ']' {
		return blocks, true
	}
	for i < len(v) {
		end := jsonwire.SkipValue(v, i)
		if end < 0 {
			return nil, false
		}
		var b envelope.ToolResultBlock
		if !walkResult(v[i:end], &b) {
			return nil, false
		}
		blocks = append(blocks, b)
		i = jsonwire.SkipSpace(v, end)
		if i < len(v) && v[i] == ']' {
			return blocks, true
		}
		if i >= len(v) || v[i] != ',' {
			return nil, false
		}
		i = jsonwire.SkipSpace(v, i+1)
	}
	return nil, false
}

// walkResult reads one tool_result object into b.
func walkResult(v []byte, b *envelope.ToolResultBlock) bool {
	return eachMember(v, func(name string, val []byte) bool {
		switch name {
		case "type":
			return plainString(val, &b.Type)
		case "tool_use_id":
			return plainString(val, &b.ToolUseID)
		case "content":
			return len(val) > 0 && val[0] == '[' && b.Content.UnmarshalJSON(val) == nil
		case "is_error":
			switch string(val) {
			case "true":
				b.IsError = true
			case "false":
				b.IsError = false
			default:
				return false
			}
			return true
		}
		for _, field := range [...]string{"type", "tool_use_id", "content", "is_error"} {
			if strings.EqualFold(name, field) {
				return false // encoding/json would match it: let it
			}
		}
		return true
	})
}

// eachMember calls fn with the name and the value of each member of the
// valid JSON object v, in order, while it returns true; it is false when v
// is not an object, a name is not plain ASCII, or fn said no.
func eachMember(v []byte, fn func(name string, val []byte) bool) bool {
	if len(v) < 2 || v[0] != '{' {
		return false
	}
	i := jsonwire.SkipSpace(v, 1)
	if i < len(v) && v[i] == '}' {
		return true
	}
	for i < len(v) && v[i] == '"' {
		end := jsonwire.SkipString(v, i)
		if end < 0 || !jsonwire.PlainASCII(v[i+1:end-1]) {
			return false
		}
		name := v[i+1 : end-1]
		if i = jsonwire.SkipSpace(v, end); i >= len(v) || v[i] != ':' {
			return false
		}
		i = jsonwire.SkipSpace(v, i+1)
		vend := jsonwire.SkipValue(v, i)
		if vend < 0 || !fn(memberName(name), v[i:vend]) {
			return false
		}
		if i = jsonwire.SkipSpace(v, vend); i < len(v) && v[i] == '}' {
			return true
		}
		if i >= len(v) || v[i] != ',' {
			return false
		}
		i = jsonwire.SkipSpace(v, i+1)
	}
	return false
}

// memberName is string(b), without a copy for the names the API writes.
func memberName(b []byte) string {
	switch string(b) {
	case "role":
		return "role"
	case "content":
		return "content"
	case "type":
		return "type"
	case "tool_use_id":
		return "tool_use_id"
	case "is_error":
		return "is_error"
	}
	return string(b)
}

// plainString sets *s to the JSON string v when it holds no escapes and is
// valid UTF-8 (so that it is its own value).
func plainString(v []byte, s *string) bool {
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	inner := v[1 : len(v)-1]
	if !jsonwire.PlainASCII(inner) && !jsonwire.Plain(inner) {
		return false
	}
	if string(inner) == "tool_result" {
		*s = "tool_result"
	} else {
		*s = string(inner)
	}
	return true
}

// encodeCalls is json.Marshal(calls), written directly when every string
// and input is already as json.Marshal writes it (printable ASCII without
// what it escapes, inputs valid and compact): the usual case, byte for
// byte the same.
func encodeCalls(calls []envelope.ToolUseBlock) ([]byte, error) {
	size := 1
	for i := range calls {
		c := &calls[i]
		if !asIsString(c.Type) || !asIsString(c.ID) || !asIsString(c.Name) || !asIsInput(c.Input) {
			return json.Marshal(calls)
		}
		size += len(`{"type":"","id":"","name":"","input":},`) + len(c.Type) + len(c.ID) + len(c.Name) + len(c.Input)
	}
	buf := make([]byte, 0, size)
	buf = append(buf, '[')
	for i := range calls {
		c := &calls[i]
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"type":"`...)
		buf = append(buf, c.Type...)
		buf = append(buf, `","id":"`...)
		buf = append(buf, c.ID...)
		buf = append(buf, `","name":"`...)
		buf = append(buf, c.Name...)
		buf = append(buf, `","input":`...)
		buf = append(buf, c.Input...)
		buf = append(buf, '}')
	}
	return append(buf, ']'), nil
}

// asIsByte marks the bytes json.Marshal writes as they are inside a
// string: printable ASCII but '"', '\\' and the HTML characters it escapes.
var asIsByte = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// asIsString reports whether json.Marshal writes s as '"' + s + '"'.
func asIsString(s string) bool {
	for i := 0; i < len(s); i++ {
		if !asIsByte[s[i]] {
			return false
		}
	}
	return true
}

// asIsInput reports whether json.Marshal writes the raw input as it is:
// valid JSON, printable ASCII without spaces (so compact) and without the
// HTML characters it escapes.
func asIsInput(in []byte) bool {
	for _, c := range in {
		if c == ' ' || (!asIsByte[c] && c != '"' && c != '\\') {
			return false
		}
	}
	return len(in) > 0 && jsonwire.Valid(in)
}
