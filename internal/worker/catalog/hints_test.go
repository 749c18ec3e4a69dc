package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/pkg/tools"
)

// A builtin entry's hints are laid over the built-in tool's own, one by
// one: those the file leaves out stay the built-in's.
func TestHintsOverBuiltin(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(path, []byte("tools:\n  - name: write_file\n    backend: builtin\n    hints: {destructive: false}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	no, yes := false, true
	b := fakeBuiltin("write_file")
	b.Hints = tools.Hints{ReadOnly: &no, Destructive: &yes, OpenWorld: &no}
	ts, err := f.Tools(map[string]tools.Tool{"write_file": b})
	if err != nil {
		t.Fatal(err)
	}
	h := ts[0].Hints
	if h.ReadOnly == nil || *h.ReadOnly || h.Destructive == nil || *h.Destructive || h.OpenWorld == nil || *h.OpenWorld {
		t.Errorf("hints %s; want the built-in's with destructive false from the file", hintsText(h))
	}
}

// Hints that cannot be are errors naming the file, the line and the field.
func TestHintsErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ hints, want string }{
		{"{read_only: true, destructive: true}", `tools.yaml:5: tool "x": hints.destructive: cannot be true for a read-only tool`},
		{"{idempotent: true}", `tools.yaml:5: tool "x": hints.idempotent: is not a hint here: set the entry's idempotent key`},
		{"{read_only: true, closed: true}", `hints.closed: unknown key (known keys: read_only, destructive, open_world, idempotent)`},
	} {
		path := filepath.Join(t.TempDir(), "tools.yaml")
		body := "tools:\n  - name: x\n    description: X.\n    input_schema: {type: object}\n    hints: " + tc.hints + "\n    backend: exec\n    exec: {command: [cat]}\n"
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("hints %s: err = %v; want %q", tc.hints, err, tc.want)
		}
	}
}

func hintsText(h tools.Hints) string {
	s := func(p *bool) string {
		if p == nil {
			return "unknown"
		}
		if *p {
			return "true"
		}
		return "false"
	}
	return "read_only " + s(h.ReadOnly) + ", destructive " + s(h.Destructive) + ", open_world " + s(h.OpenWorld)
}
