package toolpool_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The walls of the house (docs/architecture.md, "The sides and their
// rules"). Every non-test Go file's package belongs to one area; an area
// may import only the areas listed for it. Test files are not a package's
// imports and are left out: a test may assemble anything.
const module = "github.com/toolpool/toolpool"

// area names the part of the module a package directory belongs to.
func area(dir string) string {
	switch {
	case dir == ".":
		return "root"
	case dir == "internal/orchhost":
		return "assembly"
	case dir == "internal/worker/settle":
		return "records"
	case strings.HasPrefix(dir, "pkg/"), dir == "jetstream":
		return "public"
	case strings.HasPrefix(dir, "internal/worker"):
		return "worker"
	case strings.HasPrefix(dir, "internal/orchestrator"):
		return "orchestrator"
	case strings.HasPrefix(dir, "internal/front"):
		return "front"
	case strings.HasPrefix(dir, "internal/fleet"):
		return "fleet"
	case strings.HasPrefix(dir, "internal/infra"), dir == "internal/pooltype":
		return "infra"
	case dir == "cmd/orchestrator":
		return "cmd/orchestrator"
	case dir == "cmd/worker":
		return "cmd/worker"
	case slices.Contains([]string{"internal/cli", "internal/opscmd", "internal/bench", "internal/agent", "internal/progress"}, dir):
		return "commands"
	case slices.Contains([]string{"internal/natstest", "internal/pooltest", "internal/testbin", "internal/promtest", "internal/fakeanthropic", "internal/proctest", "internal/testdeps", "internal/docscheck"}, dir),
		strings.HasPrefix(dir, "e2e"):
		return "testsupport"
	}
	return "unknown"
}

// mayImport lists, for each area, the areas its packages may import.
var mayImport = map[string][]string{
	// The public packages build on each other and on shared
	// infrastructure (the hand-written JSON, the token rule, the network
	// guard), never on a side.
	"public": {"public", "infra"},
	// Shared infrastructure and shared words import no side.
	"infra": {"public", "infra"},
	// The worker side runs calls: it knows nothing of the orchestrator,
	// the front doors or the fleet's operations.
	"worker": {"public", "infra", "worker", "records"},
	// The orchestrator side publishes calls and waits for results: it
	// knows nothing of the worker side, the front doors or the fleet.
	"orchestrator": {"public", "infra", "orchestrator"},
	// The fleet's operations read what both sides write: dead letters and
	// attempts (the settle records), results (through the orchestrator
	// side's consumer).
	"fleet": {"public", "infra", "fleet", "orchestrator", "records"},
	// The front doors serve agents and operators over the orchestrator
	// side and the fleet's operations; never the worker side.
	"front": {"public", "infra", "front", "orchestrator", "fleet", "records"},
	// The root is the API: it wraps the worker side's host and the
	// orchestrator's assembly (internal/orchhost, which puts the
	// orchestrator side, the front doors and the fleet's watchers
	// together), and converts its own types to theirs.
	"root":     {"public", "infra", "worker", "records", "orchestrator", "front", "fleet", "assembly"},
	"assembly": {"public", "infra", "worker", "records", "orchestrator", "front", "fleet"},
	// The settle step's records (dead-letter entries, attempts) are what
	// the worker side writes and the operators read.
	"records": {"public", "infra"},
	// The operators' commands, the bench and the agent loop sit on the
	// root and the fleet's operations.
	"commands": {"root", "public", "infra", "fleet", "commands", "orchestrator", "worker", "records", "front", "assembly"},
	// Test support assembles anything.
	"testsupport": {"root", "public", "infra", "worker", "records", "orchestrator", "front", "fleet", "assembly", "commands", "testsupport"},
}

// cmdImports lists the module packages besides the public ones (pkg/...,
// jetstream/) each binary may import: the orchestrator's only the root
// package, the command idiom with its output helpers and the operators'
// commands; the worker's the worker side's host instead of the root, since
// the root links the orchestrator side as well.
var cmdImports = map[string][]string{
	"cmd/orchestrator": {"", "/internal/cli", "/internal/opscmd", "/internal/progress"},
	"cmd/worker":       {"/internal/cli", "/internal/worker/host"},
}

func TestLayering(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "node_modules" || (strings.HasPrefix(n, ".") && path != ".") {
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
		from := area(dir)
		if from == "unknown" {
			t.Errorf("%s: package %s belongs to no area; add it to area() and docs/architecture.md", path, dir)
			return nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			checkImport(t, path, dir, from, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 150 {
		t.Errorf("checked %d files: the walk looked in the wrong place", checked)
	}
}

func checkImport(t *testing.T, path, dir, from, p string) {
	t.Helper()
	switch {
	case strings.HasPrefix(p, "github.com/nats-io/nats-server/"):
		if dir != "internal/infra/embedded" && from != "testsupport" {
			t.Errorf("%s imports %s: only internal/infra/embedded imports nats-server", path, p)
		}
		return
	case strings.HasPrefix(p, "github.com/prometheus/"):
		if dir != "internal/infra/metrics" && from != "testsupport" {
			t.Errorf("%s imports %s: only internal/infra/metrics imports Prometheus", path, p)
		}
		return
	case p != module && !strings.HasPrefix(p, module+"/"):
		return
	}
	rel := strings.TrimPrefix(p, module)
	if allowed, ok := cmdImports[from]; ok {
		if area(strings.TrimPrefix(rel, "/")) != "public" && !slices.Contains(allowed, rel) {
			t.Errorf("%s imports %s: %s imports only %q (the root is \"\")", path, p, from, allowed)
		}
		return
	}
	to := area(strings.TrimPrefix(rel, "/"))
	if rel == "" {
		to = "root"
	}
	if !slices.Contains(mayImport[from], to) {
		t.Errorf("%s imports %s: the %s area may import only %v, not %s", path, p, from, mayImport[from], to)
	}
}

// TestPublicPackages: pkg/ holds the wire types, the taxonomy, the tools
// and the HTTP client; everything else is internal.
func TestPublicPackages(t *testing.T) {
	t.Parallel()
	got := goList(t, "./pkg/...")
	want := []string{"/pkg/classify", "/pkg/client", "/pkg/envelope", "/pkg/tools", "/pkg/tools/builtin", "/pkg/tools/demo"}
	for i := range want {
		want[i] = module + want[i]
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("go list ./pkg/... = %v, want %v", got, want)
	}
}

// TestBinaryDeps: the worker binary links no orchestrator side, front
// door, fleet operation or embedded server; the HTTP client links no NATS.
func TestBinaryDeps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pkg       string
		forbidden []string
	}{
		{"./cmd/worker", []string{module + "/internal/orchestrator", module + "/internal/front", module + "/internal/fleet",
			module + "/internal/infra/embedded", "github.com/nats-io/nats-server"}},
		{"./pkg/client", []string{"github.com/nats-io/", module + "/internal/orchestrator", module + "/internal/front"}},
	} {
		for _, dep := range goList(t, "-deps", tc.pkg) {
			for _, f := range tc.forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s links %s", tc.pkg, dep)
				}
			}
		}
	}
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}
