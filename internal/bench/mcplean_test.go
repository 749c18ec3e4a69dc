package bench

import (
	"strings"
	"testing"
)

// TestEachSSEData: the lean generator reads the events of an SSE answer,
// multi-line data and CRLF included, and stops at the one it wants.
func TestEachSSEData(t *testing.T) {
	stream := "event: message\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n: comment\nid: 2\ndata: two\n\nevent: message\ndata: three"
	var got []string
	ok, err := eachSSEData([]byte(stream), func(d []byte) (bool, error) {
		got = append(got, string(d))
		return string(d) == "two", nil
	})
	if !ok || err != nil || strings.Join(got, "|") != "{\"a\":\n1}|two" {
		t.Errorf("eachSSEData = %v, %v; events %q", ok, err, got)
	}
	got = nil
	ok, _ = eachSSEData([]byte(stream), func(d []byte) (bool, error) { got = append(got, string(d)); return false, nil })
	if ok || len(got) != 3 || got[2] != "three" {
		t.Errorf("to the end: %v, events %q", ok, got)
	}
}
