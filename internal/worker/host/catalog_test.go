package host_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/worker/host"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/builtin"
)

// A catalog holds the demo tools, the file's tools (a builtin entry with
// the file's settings) and the built-ins selected that the file does not
// mention; it registers them, in that order, where it is told to.
func TestCatalogHoldsWhatItIsAskedFor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "tools.yaml")
	yaml := "tools:\n" +
		"  - name: shout\n    description: Shouts.\n    input_schema: {type: object}\n    backend: exec\n    exec: {command: [tr, a-z, A-Z]}\n" +
		"  - name: read_file\n    description: Reads a note.\n    backend: builtin\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := host.LoadCatalog(host.CatalogConfig{
		DemoTools: true, Path: file, Builtins: []string{"read_file", "list_dir"},
		Builtin: builtin.Config{Workspace: filepath.Join(dir, "ws")},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	want := []string{"echo", "flaky", "list_dir", "read_file", "shout", "sleep"}
	if got := cat.Names(); !slices.Equal(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	if got := cat.MCPServers(); len(got) != 0 {
		t.Errorf("MCPServers = %v, want none", got)
	}
	reg := tools.NewRegistry()
	if err := cat.Register(reg); err != nil {
		t.Fatal(err)
	}
	if got := reg.Names(); !slices.Equal(got, want) {
		t.Errorf("registered %v, want %v", got, want)
	}
	if rt, _ := reg.Lookup("read_file"); rt.Description != "Reads a note." {
		t.Errorf("read_file's description %q: the file's settings were not laid over the built-in", rt.Description)
	}
	if err := cat.Register(tools.NewRegistry()); err != nil {
		t.Errorf("a second registry: %v", err)
	}
	if err := cat.Close(); err != nil {
		t.Error(err)
	}
	if err := cat.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// A built-in tool that cannot be served is an error saying why, and a
// host with no tool and nothing to wait for is refused.
func TestCatalogErrors(t *testing.T) {
	t.Parallel()
	ws := filepath.Join(t.TempDir(), "ws")
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"search_web"}, "search_web needs the URL of a search service"},
		{[]string{"rm_rf"}, "there is no built-in tool rm_rf"},
	} {
		_, err := host.LoadCatalog(host.CatalogConfig{Builtins: tc.names, Builtin: builtin.Config{Workspace: ws}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.names, err, tc.want)
		}
	}
	empty, err := host.LoadCatalog(host.CatalogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t)
	if _, err := host.New(host.Config{Conn: natstest.Connect(t, srv.ClientURL()), Catalog: empty}); !errors.Is(err, host.ErrNoTools) {
		t.Errorf("a host of nothing: %v, want ErrNoTools", err)
	}
}
