package cli

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/pkg/tools"
)

// TestBuiltinToolsFlag: --builtin-tools takes all, none (true, false) or
// names, and the tools registered are the ones it names.
func TestBuiltinToolsFlag(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		def  string
		args []string
		want []string
	}{
		{BuiltinNone, nil, nil},
		{BuiltinAll, nil, []string{"http_request", "list_dir", "read_file", "write_file"}},
		{BuiltinAll, []string{"--builtin-tools=false"}, nil},
		{BuiltinNone, []string{"--builtin-tools=true"}, []string{"http_request", "list_dir", "read_file", "write_file"}},
		{BuiltinNone, []string{"--builtin-tools", "read_file, list_dir"}, []string{"list_dir", "read_file"}},
		{BuiltinAll, []string{"--builtin-tools", "none"}, nil},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var b BuiltinFlags
		b.Register(fs, tt.def)
		args := append([]string{"--workspace", t.TempDir()}, tt.args...)
		if err := fs.Parse(args); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		reg := tools.NewRegistry()
		c, err := b.RegisterTools(reg)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		_ = c.Close()
		if got := reg.Names(); !slices.Equal(got, tt.want) {
			t.Errorf("default %s, %v: tools %v, want %v", tt.def, tt.args, got, tt.want)
		}
	}

	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var b BuiltinFlags
	b.Register(fs, BuiltinNone)
	if err := fs.Parse([]string{"--builtin-tools", "read_file,rm_rf"}); err == nil || !strings.Contains(err.Error(), `"rm_rf" is not a built-in tool`) {
		t.Errorf("an unknown name: %v", err)
	}
	if err := fs.Parse([]string{"--workspace", t.TempDir(), "--builtin-tools", "search_web"}); err != nil {
		t.Fatal(err)
	}
	var ue *UsageError
	if _, err := b.RegisterTools(tools.NewRegistry()); !errors.As(err, &ue) || !strings.Contains(err.Error(), "needs --search-url") {
		t.Errorf("search_web without --search-url: %v", err)
	}
}
