package testbin

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestBinaryName(t *testing.T) {
	t.Parallel()
	exe := ""
	if runtime.GOOS == "windows" {
		exe = ".exe"
	}
	for pkg, want := range map[string]string{
		"./cmd/worker": "worker", NATSServer: "nats-server", "example.com/x/v10": "x", "./v2x": "v2x",
	} {
		if got := BinaryName(pkg); got != want+exe {
			t.Errorf("BinaryName(%q) = %q, want %q", pkg, got, want+exe)
		}
	}
}

// TestSharedBuild: Program and Build of one package give the same binary,
// built once into the shared directory.
func TestSharedBuild(t *testing.T) {
	t.Parallel()
	const pkg = "./internal/worker/mcpback/internal/mcptest/cmd/mcptestserver"
	bin := Program(t, pkg)
	if again := Program(t, pkg); again != bin {
		t.Errorf("Program gave %s, then %s", bin, again)
	}
	dir := t.TempDir()
	if err := Build(dir, pkg); err != nil {
		t.Fatal(err)
	}
	shared, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	copied, err := os.Stat(filepath.Join(dir, BinaryName(pkg)))
	if err != nil {
		t.Fatal(err)
	}
	if shared.Size() != copied.Size() || shared.Mode()&0o111 == 0 || copied.Mode()&0o111 == 0 {
		t.Errorf("the shared binary %v and Build's %v differ", shared, copied)
	}
	if err := Build(dir, "./no/such/package"); err == nil {
		t.Error("building a package that does not exist succeeded")
	}
}
