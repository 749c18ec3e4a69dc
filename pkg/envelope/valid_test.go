package envelope

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

var jsonSamples = []string{
	``, ` `, `{}`, ` {} `, `[]`, `[1,2]`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1}}`, `{"a":[}`,
	`"x"`, `"x`, `"\"`, `"\\"`, `"\/\b\f\n\r\t"`, `"\u00e9"`, `"\u00g9"`, `"\u12"`, `"\x"`, `"\'"`, "\"a\tb\"", "\"\x7f\"",
	"\"\xff\xfe\"", `"\ud800"`, `"\ud83d\ude00"`, `"\udc00\ud800"`,
	`0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e`, `1e-`, `-1.5e-10`, `+1`, `1x`, `Infinity`, `NaN`,
	`true`, `tru`, `truex`, `false`, `null`, `nul`, `nullnull`, `{} {}`, `1 2`, "\t\r\n[ 1 ,\n2 ]\n", "\v{}", "\u00a0{}",
	`{"v":1,"id":"a","tool":"t","input":{"s":"\"}\\"}}`,
}

func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range jsonSamples {
		if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("validJSON(%q) = %v, json.Valid = %v", s, got, want)
		}
	}
	for _, n := range []int{maxNesting - 1, maxNesting, maxNesting + 1} {
		for _, open := range []string{"[", `{"a":`} {
			close := "]"
			if open != "[" {
				close = "}"
			}
			s := []byte(strings.Repeat(open, n) + "1" + strings.Repeat(close, n))
			if got, want := validJSON(s), json.Valid(s); got != want {
				t.Errorf("nesting %d of %s: validJSON = %v, json.Valid = %v", n, open, got, want)
			}
		}
	}
}

func TestUnquoteMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range jsonSamples {
		checkString(t, []byte(s))
	}
}

// checkString compares reader.string with encoding/json on one JSON string.
func checkString(t *testing.T, data []byte) {
	t.Helper()
	data = trimSpace(data)
	if len(data) < 2 || data[0] != '"' || !json.Valid(data) {
		return
	}
	var want string
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("encoding/json refused %q: %v", data, err)
	}
	r := reader{data: data}
	got, ok := r.string(span{0, len(data)})
	if !ok || got != want {
		t.Fatalf("string(%q) = %q, %v; encoding/json gives %q", data, got, ok, want)
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, s := range jsonSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := validJSON(data), json.Valid(data); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid = %v", data, got, want)
		}
		checkString(t, data)
	})
}

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
			if got := hasControl(string(b[:8])); got != wantControl {
				t.Fatalf("hasControl(% x) = %v", b[:8], got)
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
		if got := hasControl(string(b)); got != wantControl {
			t.Fatalf("hasControl(% x) = %v", b, got)
		}
		// appendString agrees with encoding/json, which escapes <, > and &
		// and this package does not.
		if !strings.ContainsAny(string(b), "<>&") {
			want, _ := json.Marshal(string(b))
			if got := appendString(nil, string(b)); string(got) != string(want) {
				t.Fatalf("appendString(%q) = %s, encoding/json gives %s", b, got, want)
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
