// Package testbin builds the binaries that real-process tests run: the
// project's commands and the pinned nats-server, with one go build from the
// module root, so packages that share dependencies are compiled once.
//
//	func TestMain(m *testing.M) {
//		dir, err := os.MkdirTemp("", "toolpool-x-bin-")
//		...
//		if err := testbin.Build(dir, "./cmd/worker", testbin.NATSServer); err != nil { ... }
//		workerBin = filepath.Join(dir, "worker")
//	}
//
// or, in one test, bin := testbin.Program(t, "./cmd/worker").
//
// The builds are shared: every test binary of a checkout builds into one
// directory (in the temporary directory, named after the checkout), one go
// build at a time, and go build does not link again a binary that is up to
// date. So the dozen packages that run the orchestrator or a worker link it
// once per `go test ./...`, not once each (or once per test), and wait for
// each other instead of compiling the same packages side by side.
package testbin

import (
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
)

// NATSServer is the package path of the nats-server pinned in go.mod.
const NATSServer = "github.com/nats-io/nats-server/v2"

// ModuleRoot is the directory holding go.mod, above the working directory
// (a test's is its package directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Build builds pkgs (paths relative to the module root, or NATSServer) into
// dir, without the race detector: the processes run as fast as in
// production. The binaries are built in the checkout's shared directory
// and linked (or copied) into dir. A failed build's error holds the
// compiler's output.
func Build(dir string, pkgs ...string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	shared, err := buildShared(root, pkgs)
	if err != nil {
		return err
	}
	if shared == "" { // no lock on this system: build into dir itself
		return goBuild(root, dir, pkgs)
	}
	for _, pkg := range pkgs {
		name := BinaryName(pkg)
		if err := linkOrCopy(filepath.Join(shared, name), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// Program builds pkg (as Build does) and returns the path of its binary
// in the shared directory, failing the test when the build fails. The
// binary must not be changed: other tests run it too.
func Program(t testing.TB, pkg string) string {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	shared, err := buildShared(root, []string{pkg})
	if err != nil {
		t.Fatal(err)
	}
	if shared == "" {
		shared = t.TempDir()
		if err := goBuild(root, shared, []string{pkg}); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(shared, BinaryName(pkg))
}

// BinaryName is the file name go build gives pkg's binary: its last path
// element, or the one before a major version suffix (nats-server/v2).
func BinaryName(pkg string) string {
	name := path.Base(pkg)
	if majorVersion.MatchString(name) {
		name = path.Base(path.Dir(pkg))
	}
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	return name
}

var majorVersion = regexp.MustCompile(`^v[0-9]+$`)

// built remembers the packages this process has built into the shared
// directory: a second Build of them does not run go build again.
var built struct {
	mu   sync.Mutex
	pkgs map[string]bool
}

// buildShared builds pkgs into the checkout's shared directory under its
// lock and returns the directory; "" when there is no lock on this system.
func buildShared(root string, pkgs []string) (string, error) {
	h := fnv.New64a()
	h.Write([]byte(root))
	shared := filepath.Join(os.TempDir(), fmt.Sprintf("toolpool-testbin-%x", h.Sum64()))
	built.mu.Lock()
	defer built.mu.Unlock()
	var todo []string
	for _, pkg := range pkgs {
		if !built.pkgs[pkg] {
			todo = append(todo, pkg)
		}
	}
	if len(todo) == 0 {
		return shared, nil
	}
	if err := os.MkdirAll(shared, 0o755); err != nil {
		return "", err
	}
	unlock, err := LockFile(shared + ".lock")
	if err != nil {
		return "", nil
	}
	defer unlock()
	if err := goBuild(root, shared, todo); err != nil {
		return "", err
	}
	if built.pkgs == nil {
		built.pkgs = make(map[string]bool)
	}
	for _, pkg := range todo {
		built.pkgs[pkg] = true
	}
	return shared, nil
}

// BuildFlags returns the flags of the go command that built the running
// test binary which a nested go command must repeat to find the same
// packages in Go's build cache: -trimpath, when the tests run with it
// (the README's command does, so that the cache does not depend on where
// the checkout is). Without it, a nested build compiles the whole module
// again under the other key.
func BuildFlags() []string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	for _, s := range bi.Settings {
		if s.Key == "-trimpath" && s.Value == "true" {
			return []string{"-trimpath"}
		}
	}
	return nil
}

// goBuild runs one go build of pkgs into dir from the module root, with
// the test binary's BuildFlags.
func goBuild(root, dir string, pkgs []string) error {
	args := append([]string{"build"}, BuildFlags()...)
	args = append(args, "-o", dir+string(filepath.Separator))
	cmd := exec.Command("go", append(args, pkgs...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}

// linkOrCopy makes dst the file src: a hard link, or a copy where the two
// are on different file systems.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
