package testdeps

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/testbin"
)

// A Program is a program outside Go that some tests run.
type Program struct {
	// Name is the program's file name, looked up on PATH.
	Name string
	// Dirs are directories searched after PATH (a user's PATH may lack
	// /usr/sbin).
	Dirs []string
	// EnvVar, when set, names an environment variable holding the
	// program's path; it is checked first, and a path it names must exist.
	EnvVar string
	// Package is the Debian package that installs the program, installed
	// with apt-get when CI=true and the tests run as root; "" when there
	// is none.
	Package string
	// Install is the one command that installs the program, named when a
	// test skips for its absence.
	Install string
	// For says what the tests need it for.
	For string
}

// The programs tests need.
var (
	// Chromium runs the console's and the trace view's browser tests.
	Chromium = Program{Name: "chromium", Dirs: []string{"/usr/bin"}, Package: "chromium",
		Install: "apt-get install chromium", For: "the browser tests (headless, no network)"}
	// Promtool lints the metrics scrapes and the alert rules.
	Promtool = Program{Name: "promtool", Package: "prometheus",
		Install: "apt-get install prometheus", For: "linting the metrics and the alert rules"}
	// HAProxy is the load balancer of e2e/lb.
	HAProxy = Program{Name: "haproxy", Dirs: []string{"/usr/sbin"}, Package: "haproxy",
		Install: "apt-get install haproxy", For: "the load-balancer suite (e2e/lb)"}
	// Jaeger is the tracing backend of the tracing suite, built from the
	// e2e/jaeger module (about 8 minutes on 2 cores): no package installs it.
	Jaeger = Program{Name: "jaeger", EnvVar: "TOOLPOOL_JAEGER",
		Install: "e2e/jaeger/build.sh (then TOOLPOOL_JAEGER=<the path it prints>)", For: "the tracing suite (e2e/tracing)"}
)

// aptTimeout bounds one apt-get (the update, then the install).
const aptTimeout = 10 * time.Minute

// installs remembers, per package, the outcome of this test binary's one
// apt-get install attempt.
var installs struct {
	mu   sync.Mutex
	done map[string]error
}

// Path returns the program's path. When it is missing and CI=true it is
// installed (apt-get, when the tests run as root and a Debian package
// provides it), or the test fails: CI must run every test. Elsewhere a
// missing program skips the test with a message naming the command that
// installs it.
func (p Program) Path(t testing.TB) string {
	t.Helper()
	path, err := p.find()
	if err == nil {
		return path
	}
	if !InCI() {
		unavailable(t, err.Error(), p.Install)
		return ""
	}
	if p.Package == "" || os.Geteuid() != 0 {
		t.Fatalf("%v; CI must run %s: install it first (%s)", err, p.For, p.Install)
		return ""
	}
	if ierr := p.aptInstall(); ierr != nil {
		t.Fatalf("%v; CI must run %s, and installing it failed: %v", err, p.For, ierr)
		return ""
	}
	path, err = p.find()
	if err != nil {
		t.Fatalf("apt-get installed %s, but %v", p.Package, err)
	}
	t.Logf("installed %s (apt-get install %s)", p.Name, p.Package)
	return path
}

// find looks the program up: the environment variable, PATH, Dirs.
func (p Program) find() (string, error) {
	if p.EnvVar != "" {
		if v := os.Getenv(p.EnvVar); v != "" {
			if _, err := os.Stat(v); err != nil {
				return "", fmt.Errorf("%s names %s, which %s needs: %v", p.EnvVar, p.Name, p.For, err)
			}
			return v, nil
		}
	}
	if path, err := exec.LookPath(p.Name); err == nil {
		return path, nil
	}
	for _, dir := range p.Dirs {
		path := filepath.Join(dir, p.Name)
		if fi, err := os.Stat(path); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return path, nil
		}
	}
	where := "on PATH"
	if p.EnvVar != "" {
		where = p.EnvVar + " is unset and it is not on PATH"
	}
	return "", fmt.Errorf("%s (needed for %s) is missing: %s", p.Name, p.For, where)
}

// aptInstall installs the program's package once per test binary, one
// binary at a time (apt-get refuses to run twice at once).
func (p Program) aptInstall() error {
	installs.mu.Lock()
	defer installs.mu.Unlock()
	if err, ok := installs.done[p.Package]; ok {
		return err
	}
	err := p.aptInstallLocked()
	if installs.done == nil {
		installs.done = make(map[string]error)
	}
	installs.done[p.Package] = err
	return err
}

// aptInstallLocked runs apt-get update and install under the apt lock
// file, unless another test binary installed the program meanwhile.
func (p Program) aptInstallLocked() error {
	unlock, err := testbin.LockFile(lockPath("apt", "apt"))
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := p.find(); err == nil {
		return nil
	}
	for _, args := range [][]string{
		{"update", "-qq"},
		{"install", "-y", "-qq", "--no-install-recommends", p.Package},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), aptTimeout)
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "RUNLEVEL=1")
		cmd.WaitDelay = 10 * time.Second
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			if len(out) > 4000 {
				out = out[len(out)-4000:]
			}
			return fmt.Errorf("apt-get %s: %v\n%s", args[0], err, out)
		}
	}
	return nil
}

// unavailable fails the test in CI and skips it elsewhere, naming the
// command that installs what is missing.
func unavailable(t testing.TB, why, install string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s; CI must run this test: install it first (%s)", why, install)
		return
	}
	t.Skipf("%s; to run this test, install it: %s", why, install)
}
