package toolpool_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayering: imports go downward only. No package under pkg/ imports
// the root package, cmd/, internal/cli or internal/bench, and none but
// pkg/metrics imports Prometheus (docs/architecture.md). Test files are
// not packages' imports and are left out.
func TestLayering(t *testing.T) {
	t.Parallel()
	const module = "github.com/toolpool/toolpool"
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir("pkg", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		dir := filepath.ToSlash(filepath.Dir(path))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case p == module,
				strings.HasPrefix(p, module+"/cmd/"),
				p == module+"/internal/cli", strings.HasPrefix(p, module+"/internal/cli/"),
				p == module+"/internal/bench", strings.HasPrefix(p, module+"/internal/bench/"):
				t.Errorf("%s imports %s: pkg/ may not import upward", path, p)
			case strings.HasPrefix(p, "github.com/prometheus/") && dir != "pkg/metrics":
				t.Errorf("%s imports %s: only pkg/metrics imports Prometheus", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Errorf("checked %d files under pkg/: the walk looked in the wrong place", checked)
	}
}
