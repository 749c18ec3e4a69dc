package builtin_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools/builtin"
)

const (
	permanent  = envelope.ClassPermanent
	transient  = envelope.ClassTransient
	validation = envelope.ClassValidation
)

// fileBundle is a workspace next to a directory outside it, with links
// from inside to outside.
type fileBundle struct {
	*harness
	root, outside string
	secret        string // a file outside the workspace
}

// setupFiles makes:
//
//	ws/docs/a.txt           "alpha"
//	ws/inlink  -> docs      (inside: allowed)
//	ws/toroot  -> /
//	ws/out     -> <outside> (absolute)
//	ws/outrel  -> ../outside
//	ws/secretlink -> <outside>/secret.txt
//	ws/newlink -> <outside>/new.txt (dangling)
//	outside/secret.txt      "top secret"
func setupFiles(t *testing.T, cfg builtin.FileConfig) *fileBundle {
	t.Helper()
	dir := t.TempDir()
	b := &fileBundle{root: filepath.Join(dir, "ws"), outside: filepath.Join(dir, "outside")}
	b.secret = filepath.Join(b.outside, "secret.txt")
	mustMkdir(t, filepath.Join(b.root, "docs"))
	mustMkdir(t, b.outside)
	mustWrite(t, filepath.Join(b.root, "docs", "a.txt"), "alpha")
	mustWrite(t, b.secret, "top secret")
	for link, target := range map[string]string{
		"inlink":     "docs",
		"toroot":     "/",
		"out":        b.outside,
		"outrel":     filepath.Join("..", "outside"),
		"secretlink": b.secret,
		"newlink":    filepath.Join(b.outside, "new.txt"),
	} {
		if err := os.Symlink(target, filepath.Join(b.root, link)); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Root = b.root
	ts, closer, err := builtin.NewFileTools(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	b.harness = newHarness(t, ts...)
	return b
}

func mustMkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// outsideState is the names and contents of everything under outside.
func (b *fileBundle) outsideState(t *testing.T) map[string]string {
	t.Helper()
	state := map[string]string{}
	err := filepath.WalkDir(b.outside, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(b.outside, p)
		if d.IsDir() {
			state[rel+"/"] = ""
			return nil
		}
		data, err := os.ReadFile(p)
		state[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return state
}

func TestFileToolsRefuseEscapes(t *testing.T) {
	t.Parallel()
	b := setupFiles(t, builtin.FileConfig{})
	before := b.outsideState(t)

	escapes := []struct{ tool, input string }{
		{"read_file", `{"path": "../outside/secret.txt"}`},
		{"read_file", `{"path": "../../etc/passwd"}`},
		{"read_file", `{"path": "/etc/passwd"}`},
		{"read_file", jsonInput(t, map[string]string{"path": b.secret})},
		{"read_file", jsonInput(t, map[string]string{"path": filepath.Join(b.root, "docs", "a.txt")})}, // absolute, even inside
		{"read_file", `{"path": "docs/../../outside/secret.txt"}`},
		{"read_file", `{"path": "toroot/etc/passwd"}`},
		{"read_file", `{"path": "out/secret.txt"}`},
		{"read_file", `{"path": "outrel/secret.txt"}`},
		{"read_file", `{"path": "secretlink"}`},
		{"read_file", `{"path": "inlink/../../outside/secret.txt"}`},
		{"write_file", `{"path": "../outside/new.txt", "content": "x"}`},
		{"write_file", jsonInput(t, map[string]string{"path": filepath.Join(b.outside, "new.txt"), "content": "x"})},
		{"write_file", `{"path": "out/new.txt", "content": "x"}`},
		{"write_file", `{"path": "out/sub/new.txt", "content": "x"}`},
		{"write_file", `{"path": "outrel/new.txt", "content": "x", "mode": "append"}`},
		{"write_file", `{"path": "newlink", "content": "x"}`},
		{"write_file", `{"path": "secretlink", "content": "overwritten"}`},
		{"write_file", `{"path": "secretlink", "content": "appended", "mode": "append"}`},
		{"write_file", `{"path": "toroot/tmp/toolpool-escape-test", "content": "x"}`},
		{"list_dir", `{"path": ".."}`},
		{"list_dir", `{"path": "/"}`},
		{"list_dir", `{"path": "out"}`},
		{"list_dir", `{"path": "outrel"}`},
		{"list_dir", `{"path": "toroot"}`},
	}
	for _, tc := range escapes {
		out, err := b.call(tc.tool, tc.input)
		if err == nil {
			t.Errorf("%s %s: succeeded with %q", tc.tool, tc.input, out)
			continue
		}
		wantErr(t, tc.tool, err, permanent, "", "path escapes the workspace")
		if strings.Contains(out, "secret") {
			t.Errorf("%s %s: output shows the secret: %q", tc.tool, tc.input, out)
		}
	}
	if after := b.outsideState(t); !mapsEqual(before, after) {
		t.Errorf("outside the workspace changed:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := os.Lstat("/tmp/toolpool-escape-test"); err == nil {
		t.Error("a file was created through the link to /")
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestFileToolsInside(t *testing.T) {
	t.Parallel()
	b := setupFiles(t, builtin.FileConfig{})
	if got := b.mustCall("read_file", `{"path": "docs/a.txt"}`); got != "alpha" {
		t.Errorf("read docs/a.txt = %q", got)
	}
	if got := b.mustCall("read_file", `{"path": "inlink/a.txt"}`); got != "alpha" {
		t.Errorf("read through a link inside = %q", got)
	}
	if got := b.mustCall("read_file", `{"path": "./docs/../docs/a.txt"}`); got != "alpha" {
		t.Errorf("read with .. inside = %q", got)
	}

	got := b.mustCall("write_file", `{"path": "new/deep/dir/n.txt", "content": "one\n"}`)
	if !strings.Contains(got, "Wrote 4 bytes") {
		t.Errorf("write: %q", got)
	}
	got = b.mustCall("write_file", `{"path": "new/deep/dir/n.txt", "content": "two\n", "mode": "append"}`)
	if !strings.Contains(got, "Appended 4 bytes") || !strings.Contains(got, "now has 8 bytes") {
		t.Errorf("append: %q", got)
	}
	if data, _ := os.ReadFile(filepath.Join(b.root, "new", "deep", "dir", "n.txt")); string(data) != "one\ntwo\n" {
		t.Errorf("after write and append the file holds %q", data)
	}
	b.mustCall("write_file", `{"path": "new/deep/dir/n.txt", "content": "replaced"}`)
	if got := b.mustCall("read_file", `{"path": "new/deep/dir/n.txt"}`); got != "replaced" {
		t.Errorf("write mode did not replace: %q", got)
	}
	b.mustCall("write_file", `{"path": "empty.txt", "content": ""}`)
	if got := b.mustCall("read_file", `{"path": "empty.txt"}`); !strings.Contains(got, "is empty") {
		t.Errorf("empty file: %q", got)
	}
	b.mustCall("write_file", `{"path": "fresh.txt", "content": "a", "mode": "append"}`)
	if data, _ := os.ReadFile(filepath.Join(b.root, "fresh.txt")); string(data) != "a" {
		t.Errorf("append to a new file: %q", data)
	}
}

func TestFileErrors(t *testing.T) {
	t.Parallel()
	b := setupFiles(t, builtin.FileConfig{})
	tests := []struct {
		tool, input string
		class       envelope.Class
		code        string
		want        []string
	}{
		{"read_file", `{"path": "missing.txt"}`, permanent, classify.CodeNotFound,
			[]string{`"missing.txt"`, "listing the directory"}},
		{"read_file", `{"path": "docs"}`, permanent, "", []string{"is a directory", "list_dir"}},
		{"read_file", `{"path": "docs/a.txt/x"}`, permanent, "", []string{"is a file, not a directory"}},
		{"read_file", `{"path": "docs/a.txt", "encoding": "koi8-r"}`, validation, classify.CodeInvalidArgument,
			[]string{"encoding", "utf-8", "base64"}},
		{"read_file", `{"path": ""}`, validation, classify.CodeInvalidArgument, []string{"path"}},
		{"read_file", `{"path": "docs/a.txt", "extra": 1}`, validation, classify.CodeInvalidArgument, []string{"extra"}},
		{"write_file", `{"path": "docs", "content": "x"}`, permanent, "", []string{"is a directory"}},
		{"write_file", `{"path": ".", "content": "x"}`, validation, classify.CodeInvalidArgument, []string{"path"}},
		{"write_file", `{"path": "newdir/", "content": "x"}`, validation, classify.CodeInvalidArgument, []string{"path", "ends with /"}},
		{"write_file", `{"path": "x.txt", "content": "x", "mode": "prepend"}`, validation, classify.CodeInvalidArgument, []string{"mode"}},
		{"write_file", `{"path": "x.txt"}`, validation, classify.CodeInvalidArgument, []string{"content"}},
		{"list_dir", `{"path": "nope"}`, permanent, classify.CodeNotFound, []string{`"nope"`}},
		{"list_dir", `{"path": "docs/a.txt"}`, permanent, "", []string{"is a file", "read_file"}},
	}
	for _, tc := range tests {
		_, err := b.call(tc.tool, tc.input)
		wantErr(t, tc.tool, err, tc.class, tc.code, tc.want...)
	}
}

func TestReadFileCapsAndEncodings(t *testing.T) {
	t.Parallel()
	b := setupFiles(t, builtin.FileConfig{MaxReadBytes: 9})
	// 13 bytes: "héllo wörld" with é and ö two bytes each; byte 9 is the
	// first of "ö".
	mustWrite(t, filepath.Join(b.root, "u.txt"), "héllo wörld")
	got := b.mustCall("read_file", `{"path": "u.txt"}`)
	note, body, ok := strings.Cut(got, "\n")
	if !ok || body != "héllo w" {
		t.Errorf("cut text = %q, want the first 9 bytes cut back to a whole character", body)
	}
	for _, w := range []string{`"u.txt" is 13 bytes`, "first 8 bytes", "5 bytes were left out"} {
		if !strings.Contains(note, w) {
			t.Errorf("note %q does not contain %q", note, w)
		}
	}

	bin := []byte{0, 1, 2, 0xff, 0xfe, 'a'}
	if err := os.WriteFile(filepath.Join(b.root, "b.bin"), bin, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := b.mustCall("read_file", `{"path": "b.bin", "encoding": "base64"}`); got != base64.StdEncoding.EncodeToString(bin) {
		t.Errorf("base64 = %q", got)
	}
	if got := b.mustCall("read_file", `{"path": "b.bin", "encoding": "latin-1"}`); got != "\x00\x01\x02ÿþa" {
		t.Errorf("latin-1 = %q", got)
	}
	got = b.mustCall("read_file", `{"path": "b.bin"}`)
	if !strings.Contains(got, "not valid UTF-8") || !strings.Contains(got, "base64") || !strings.Contains(got, "2 invalid bytes") || !strings.Contains(got, "\x00\x01\x02\uFFFD\uFFFDa") {
		t.Errorf("invalid UTF-8 read as text = %q", got)
	}
	if got := b.mustCall("read_file", `{"path": "docs/a.txt", "encoding": "UTF8"}`); got != "alpha" {
		t.Errorf("encoding alias = %q", got)
	}

	big := strings.Repeat("x", 25)
	mustWrite(t, filepath.Join(b.root, "big.txt"), big)
	got = b.mustCall("read_file", `{"path": "big.txt", "encoding": "base64"}`)
	note, body, _ = strings.Cut(got, "\n")
	if body != base64.StdEncoding.EncodeToString([]byte(big[:9])) || !strings.Contains(note, "16 bytes were left out") {
		t.Errorf("cut base64 = %q", got)
	}
}

func TestWriteFileCap(t *testing.T) {
	t.Parallel()
	b := setupFiles(t, builtin.FileConfig{MaxWriteBytes: 8})
	b.mustCall("write_file", `{"path": "ok.txt", "content": "12345678"}`)
	_, err := b.call("write_file", `{"path": "big.txt", "content": "123456789"}`)
	d := wantErr(t, "write_file", err, validation, classify.CodeInvalidArgument, "content", "append")
	if len(d.Fields) != 1 || d.Fields[0].Path != "content" {
		t.Errorf("fields %v, want content", d.Fields)
	}
	if _, err := os.Stat(filepath.Join(b.root, "big.txt")); err == nil {
		t.Error("the file was created although its content was refused")
	}
}

func TestListDir(t *testing.T) {
	t.Parallel()
	b := setupFiles(t, builtin.FileConfig{MaxListEntries: 3})
	mustMkdir(t, filepath.Join(b.root, "docs", "sub"))
	for _, n := range []string{"c.txt", "a.txt", "b.txt", "e.txt", "d.txt"} {
		mustWrite(t, filepath.Join(b.root, "docs", "sub", n), "")
	}
	got := b.mustCall("list_dir", `{"path": "docs/sub"}`)
	lines := strings.Split(got, "\n")
	if lines[0] != `"docs/sub" has 5 entries:` || len(lines) != 5 ||
		!strings.HasSuffix(lines[1], "a.txt (0 bytes)") || !strings.HasSuffix(lines[3], "c.txt (0 bytes)") ||
		!strings.Contains(lines[4], "2 more entries were left out") {
		t.Errorf("list_dir docs/sub =\n%s", got)
	}

	got = b.mustCall("list_dir", `{}`)
	want := []string{`"." has 7 entries:`, "dir      docs/", "symlink  inlink", "symlink  newlink"}
	if lines := strings.Split(got, "\n"); !slices.Equal(lines[:4], want) {
		t.Errorf("list_dir root =\n%s\nwant it to start with\n%s", got, strings.Join(want, "\n"))
	}
	if strings.Contains(got, b.outside) || strings.Contains(got, "secret.txt") {
		t.Errorf("list_dir shows where links point: %s", got)
	}
	got = b.mustCall("list_dir", `{"path": "docs"}`)
	if got != "\"docs\" has 2 entries:\nfile     a.txt (5 bytes)\ndir      sub/" {
		t.Errorf("list_dir docs = %q", got)
	}
	mustMkdir(t, filepath.Join(b.root, "void"))
	if got := b.mustCall("list_dir", `{"path": "void"}`); got != `"void" is an empty directory.` {
		t.Errorf("empty dir = %q", got)
	}
}

func TestNewFileToolsConfig(t *testing.T) {
	t.Parallel()
	if _, _, err := builtin.NewFileTools(builtin.FileConfig{}); err == nil || !strings.Contains(err.Error(), "Root") {
		t.Errorf("no root: %v", err)
	}
	if _, _, err := builtin.NewFileTools(builtin.FileConfig{Root: t.TempDir(), MaxReadBytes: -1}); err == nil ||
		!strings.Contains(err.Error(), "MaxReadBytes") {
		t.Errorf("negative cap: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "a", "b")
	ts, closer, err := builtin.NewFileTools(builtin.FileConfig{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("the workspace was not created: %v", err)
	}
	var names []string
	for _, tool := range ts {
		names = append(names, tool.Name)
		if tool.Timeout != builtin.FileTimeout {
			t.Errorf("%s timeout %v", tool.Name, tool.Timeout)
		}
		if tool.Idempotent != (tool.Name != "write_file") {
			t.Errorf("%s idempotent %v", tool.Name, tool.Idempotent)
		}
		if len(tool.Description) < 80 {
			t.Errorf("%s: description too short for the model: %q", tool.Name, tool.Description)
		}
	}
	if !slices.Equal(names, []string{"read_file", "write_file", "list_dir"}) {
		t.Errorf("tools %v", names)
	}
}
