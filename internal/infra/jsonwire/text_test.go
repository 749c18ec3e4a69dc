package jsonwire

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestTrim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in         string
		start, end int
	}{
		{"", 0, 0}, {"   ", 3, 3}, {" {} ", 1, 3}, {"\t\r\n1\n", 3, 4}, {"\v1", 0, 2},
	} {
		if s, e := Trim([]byte(tc.in)); s != tc.start || e != tc.end {
			t.Errorf("Trim(%q) = %d, %d; want %d, %d", tc.in, s, e, tc.start, tc.end)
		}
	}
}

// Plain says whether the inside of a string is what encoding/json decodes.
func TestPlain(t *testing.T) {
	t.Parallel()
	for _, inner := range []string{"", "abc", "é", `a\nb`, `\u00e9`, "\xff", "a\xc3", `a\\`, "日本"} {
		var decoded string
		if err := json.Unmarshal([]byte(`"`+inner+`"`), &decoded); err != nil {
			t.Fatalf("%q: %v", inner, err)
		}
		want := !strings.Contains(inner, `\`) && decoded == inner
		if got := Plain([]byte(inner)); got != want {
			t.Errorf("Plain(%q) = %v, want %v", inner, got, want)
		}
		if PlainASCII([]byte(inner)) && !Plain([]byte(inner)) {
			t.Errorf("PlainASCII(%q) but not Plain", inner)
		}
	}
}

// ParseInt agrees with strconv on integers and tells the rest apart.
func TestParseInt(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"0", "-0", "7", "-7", "123456789", strconv.FormatInt(math.MaxInt64, 10), strconv.FormatInt(math.MinInt64, 10),
		"9223372036854775808", "-9223372036854775809", "99999999999999999999", "-99999999999999999999",
		"1.5", "1e3", "1.0", "-", "", "+1", "1x", "922337203685477580", "9223372036854775809",
	} {
		want, err := strconv.ParseInt(s, 10, 64)
		wantStatus := IntOK
		switch {
		case err != nil && strings.Contains(err.Error(), "range"):
			wantStatus = IntRange
		case err != nil || strings.HasPrefix(s, "+"):
			wantStatus, want = IntNotInteger, 0
		}
		if wantStatus == IntRange {
			want = 0
		}
		got, st := ParseInt(s)
		if got != want || st != wantStatus {
			t.Errorf("ParseInt(%q) = %d, %d; want %d, %d", s, got, st, want, wantStatus)
		}
		if gotB, stB := ParseInt([]byte(s)); gotB != got || stB != st {
			t.Errorf("ParseInt([]byte(%q)) = %d, %d; the string form gives %d, %d", s, gotB, stB, got, st)
		}
	}
}

// TestImportedOnlyByEnvelopeAndTools: the hand-written JSON is the codec's,
// the fast check's and the two ends of the HTTP API's (the server reading
// request bodies, pkg/client reading answers: issue 22's front door);
// everything else goes through them (or through encoding/json), so nothing
// else reaches down here.
func TestImportedOnlyByEnvelopeAndTools(t *testing.T) {
	t.Parallel()
	const self = "github.com/toolpool/toolpool/internal/infra/jsonwire"
	allowed := map[string]bool{"pkg/envelope": true, "pkg/tools": true, "internal/infra/jsonwire": true,
		"internal/front/httpapi": true, "pkg/client": true}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found from the test's directory: %v", err)
	}
	fset := token.NewFileSet()
	found := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if imp.Path.Value != strconv.Quote(self) {
				continue
			}
			found++
			dir, _ := filepath.Rel(root, filepath.Dir(path))
			if !allowed[filepath.ToSlash(dir)] {
				t.Errorf("%s imports internal/jsonwire; only pkg/envelope, pkg/tools, internal/front/httpapi and pkg/client may", filepath.ToSlash(dir))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Error("no file imports internal/jsonwire: the walk looked in the wrong place")
	}
}
