package jsonwire

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// The word-at-a-time scans find the first byte a byte-by-byte scan finds.
func TestWordScans(t *testing.T) {
	t.Parallel()
	// Bytes on the edges of the classes, and plain ones.
	edge := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', '\\', 0x5b, 0x5d, 0x7e, 0x7f, 0x80, 0x81, 0xc3, 0xdf, 0xfe, 0xff, 'a', 'a', 'a', 'a'}
	r := rand.New(rand.NewPCG(3, 4))
	var buf [24]byte
	for range 200000 {
		for i := range buf {
			buf[i] = edge[r.IntN(len(edge))]
			if r.IntN(3) > 0 {
				buf[i] = 'a'
			}
		}
		b := buf[:r.IntN(len(buf)+1)]
		if len(b) >= 8 {
			x := binary.LittleEndian.Uint64(b)
			wantStop := -1
			for i, c := range b[:8] {
				if c < 0x20 || c == '"' || c == '\\' {
					wantStop = i
					break
				}
			}
			if m := stringStops(x); (m == 0) != (wantStop < 0) || m != 0 && firstFlagged(m) != wantStop {
				t.Fatalf("stringStops(% x) = %#x, want the byte at %d", b[:8], m, wantStop)
			}
			wantControl := false
			for _, c := range b[:8] {
				wantControl = wantControl || c < 0x20 || c == 0x7f
			}
			if got := HasControl(string(b[:8])); got != wantControl {
				t.Fatalf("HasControl(% x) = %v", b[:8], got)
			}
		}
		want := len(b)
		for i, c := range b {
			if c >= 0x80 || c == '\\' {
				want = i
				break
			}
		}
		if got := plainRun(b, 0); got != want {
			t.Fatalf("plainRun(% x) = %d, want %d", b, got, want)
		}
		wantControl := false
		for _, c := range b {
			wantControl = wantControl || c < 0x20 || c == 0x7f
		}
		if got := HasControl(string(b)); got != wantControl {
			t.Fatalf("HasControl(% x) = %v", b, got)
		}
		// appendString agrees with encoding/json, which escapes <, > and &
		// and AppendString does not.
		if !strings.ContainsAny(string(b), "<>&") {
			want, _ := json.Marshal(string(b))
			if got := AppendString(nil, string(b)); string(got) != string(want) {
				t.Fatalf("AppendString(%q) = %s, encoding/json gives %s", b, got, want)
			}
		}
	}
}

// firstFlagged is the index of the byte whose high bit is the lowest set in m.
func firstFlagged(m uint64) int {
	for i := range 8 {
		if m&(0x80<<(8*i)) != 0 {
			return i
		}
	}
	return -1
}
