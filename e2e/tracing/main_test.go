package tracing_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/testbin"
)

// Paths of the binaries TestMain finds or builds; jaegerBin is "" when
// Jaeger is not built (jaegerMissing says why).
var (
	jaegerBin       string
	jaegerMissing   string
	orchestratorBin string
	workerBin       string
)

// buildJaeger is the one command that builds Jaeger for these tests.
const buildJaeger = "e2e/jaeger/build.sh"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	jaegerBin, jaegerMissing = findJaeger(os.Getenv)
	if jaegerBin != "" {
		// Without Jaeger every test skips (or fails in CI): the pool's
		// binaries are not worth building then.
		dir, err := os.MkdirTemp("", "toolpool-tracing-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "tracing:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		if err := testbin.Build(dir, "./cmd/orchestrator", "./cmd/worker"); err != nil {
			fmt.Fprintln(os.Stderr, "tracing:", err)
			return 1
		}
		orchestratorBin = filepath.Join(dir, "orchestrator")
		workerBin = filepath.Join(dir, "worker")
	}
	code := m.Run()
	if code != 0 {
		return code
	}
	// The tests drive real processes; what they start in this process
	// (HTTP servers and clients, the browser's connection) must be
	// stopped by the time they end.
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "tracing: goroutines leaked:", err)
		return 1
	}
	return 0
}

// findJaeger returns the Jaeger binary: TOOLPOOL_JAEGER when set, else
// where build.sh puts it by default. When there is none it returns "" and
// why, naming the command that builds it.
func findJaeger(getenv func(string) string) (path, missing string) {
	if p := getenv("TOOLPOOL_JAEGER"); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Sprintf("TOOLPOOL_JAEGER=%s: %v; run %s, which builds Jaeger and prints its path", p, err, buildJaeger)
		}
		return p, ""
	}
	version, err := jaegerVersion()
	if err != nil {
		return "", err.Error()
	}
	cache := getenv("XDG_CACHE_HOME")
	if cache == "" {
		home := getenv("HOME")
		if home == "" {
			return "", fmt.Sprintf("neither TOOLPOOL_JAEGER nor HOME is set; run %s and set TOOLPOOL_JAEGER to the path it prints", buildJaeger)
		}
		cache = filepath.Join(home, ".cache")
	}
	p := filepath.Join(cache, "toolpool", "jaeger-"+version, "jaeger")
	if err := executable(p); err != nil {
		return "", fmt.Sprintf("Jaeger %s is not built (%s: %v): run %s once (about 8 minutes on 2 cores), or set TOOLPOOL_JAEGER to a jaeger binary", version, p, err, buildJaeger)
	}
	return p, ""
}

// executable checks that path is an executable regular file.
func executable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return errors.New("no such file")
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return errors.New("not a regular file")
	case fi.Mode().Perm()&0o111 == 0:
		return errors.New("not executable")
	}
	return nil
}

// jaegerVersion is the version of Jaeger that e2e/jaeger/go.mod requires
// (build.sh names its cache directory after it).
func jaegerVersion() (string, error) {
	root, err := testbin.ModuleRoot()
	if err != nil {
		return "", err
	}
	f, err := os.Open(filepath.Join(root, "e2e", "jaeger", "go.mod"))
	if err != nil {
		return "", fmt.Errorf("the Jaeger module: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if fields = trimRequire(fields); len(fields) >= 2 && fields[0] == "github.com/jaegertracing/jaeger" {
			return fields[1], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("e2e/jaeger/go.mod requires no github.com/jaegertracing/jaeger")
}

// trimRequire drops a leading "require" from a go.mod line's fields.
func trimRequire(fields []string) []string {
	if len(fields) > 0 && fields[0] == "require" {
		return fields[1:]
	}
	return fields
}

// needJaeger skips the test when Jaeger is not built, naming the command
// that builds it, and fails it in CI (CI=true), which must run it.
func needJaeger(t *testing.T) {
	t.Helper()
	if jaegerBin != "" {
		return
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("CI must run the tracing tests: %s", jaegerMissing)
	}
	t.Skip(jaegerMissing)
}
