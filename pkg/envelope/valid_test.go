package envelope

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/internal/infra/jsonwire"
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
		if got, want := jsonwire.Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("jsonwire.Valid(%q) = %v, json.Valid = %v", s, got, want)
		}
	}
	for _, n := range []int{jsonwire.MaxNesting - 1, jsonwire.MaxNesting, jsonwire.MaxNesting + 1} {
		for _, open := range []string{"[", `{"a":`} {
			close := "]"
			if open != "[" {
				close = "}"
			}
			s := []byte(strings.Repeat(open, n) + "1" + strings.Repeat(close, n))
			if got, want := jsonwire.Valid(s), json.Valid(s); got != want {
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
		if got, want := jsonwire.Valid(data), json.Valid(data); got != want {
			t.Fatalf("jsonwire.Valid(%q) = %v, json.Valid = %v", data, got, want)
		}
		checkString(t, data)
	})
}
