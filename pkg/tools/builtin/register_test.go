package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/builtin"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRegister(t *testing.T) {
	t.Parallel()
	ws := filepath.Join(t.TempDir(), "ws")
	reg := tools.NewRegistry()
	closer, err := builtin.Register(reg, builtin.Config{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.Names(); !slices.Equal(got, []string{"http_request", "list_dir", "read_file", "write_file"}) {
		t.Errorf("without a search URL: %v", got)
	}
	if err := closer.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}

	reg = tools.NewRegistry()
	closer, err = builtin.Register(reg, builtin.Config{Workspace: ws, SearchURL: "http://127.0.0.1:8888"})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if got := reg.Names(); !slices.Equal(got, []string{"http_request", "list_dir", "read_file", "search_web", "write_file"}) {
		t.Errorf("with a search URL: %v", got)
	}
	for _, name := range reg.Names() {
		rt, _ := reg.Lookup(name)
		want := map[string]bool{"read_file": true, "list_dir": true, "search_web": true}[name]
		if rt.Idempotent != want {
			t.Errorf("%s: Idempotent %v, want %v", name, rt.Idempotent, want)
		}
		// read-only, destructive, open world
		wantHints := map[string][3]bool{
			"read_file": {true, false, false}, "list_dir": {true, false, false},
			"write_file": {false, true, false}, "http_request": {false, true, true},
			"search_web": {true, false, true},
		}[name]
		h := rt.Hints
		if h.ReadOnly == nil || h.Destructive == nil || h.OpenWorld == nil ||
			[3]bool{*h.ReadOnly, *h.Destructive, *h.OpenWorld} != wantHints {
			t.Errorf("%s: hints %s, want read-only, destructive, open world = %v", name, hintsText(h), wantHints)
		}
	}

	// A second registration finds the names taken and adds nothing.
	if _, err := builtin.Register(reg, builtin.Config{Workspace: ws}); !errors.Is(err, tools.ErrDuplicateTool) {
		t.Errorf("second Register: %v, want ErrDuplicateTool", err)
	}
	partial := tools.NewRegistry()
	partial.MustRegister(tools.Tool{Name: "list_dir", InputSchema: builtin.ListDirSchema,
		Handler: func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text("mine"), nil }})
	if _, err := builtin.Register(partial, builtin.Config{Workspace: ws}); !errors.Is(err, tools.ErrDuplicateTool) {
		t.Errorf("Register over a taken name: %v, want ErrDuplicateTool", err)
	}
	if got := partial.Names(); !slices.Equal(got, []string{"list_dir"}) {
		t.Errorf("after a failed Register the registry holds %v, want only the tool it had", got)
	}
}

func TestRegisterErrors(t *testing.T) {
	t.Parallel()
	if _, err := builtin.Register(tools.NewRegistry(), builtin.Config{}); err == nil {
		t.Error("no workspace accepted")
	}
	if _, err := builtin.Register(nil, builtin.Config{Workspace: t.TempDir()}); err == nil {
		t.Error("nil registry accepted")
	}
	if _, err := builtin.Register(tools.NewRegistry(), builtin.Config{Workspace: t.TempDir(), SearchURL: "not a url"}); err == nil {
		t.Error("bad search URL accepted")
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := builtin.Register(tools.NewRegistry(), builtin.Config{Workspace: file}); err == nil {
		t.Error("a file as workspace accepted")
	}
}

func hintsText(h tools.Hints) string {
	b, _ := json.Marshal(h)
	return string(b)
}
