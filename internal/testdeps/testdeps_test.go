package testdeps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// writeLock writes a package-lock.json pinning pkgs (name -> version) into
// dir, plus one optional package that is never installed.
func writeLock(t *testing.T, dir string, pkgs map[string]string) {
	t.Helper()
	entries := []string{`"": {"name": "x"}`, `"node_modules/@esbuild/win32-x64": {"version": "0.1.0", "optional": true}`}
	for name, v := range pkgs {
		entries = append(entries, fmt.Sprintf(`"node_modules/%s": {"version": %q}`, name, v))
	}
	lock := `{"lockfileVersion": 3, "packages": {` + strings.Join(entries, ", ") + `}}`
	if err := os.WriteFile(filepath.Join(dir, "package-lock.json"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
}

// installModule writes node_modules/<name>/package.json at version.
func installModule(t *testing.T, dir, name, version string) {
	t.Helper()
	d := filepath.Join(dir, "node_modules", filepath.FromSlash(name))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "package.json"), []byte(`{"name": "`+name+`", "version": "`+version+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
}

var pinned = map[string]string{"openai": "7.55.0", "@anthropic-ai/sdk": "1.10.0", "openai/node_modules/tslib": "2.8.1"}

func TestCheckModules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeLock(t, dir, pinned)
	if err := checkModules(dir); err == nil || !strings.Contains(err.Error(), "is missing (and 2 more)") {
		t.Errorf("nothing installed: %v, want the first missing package and a count", err)
	}
	for name, v := range pinned {
		installModule(t, dir, name, v)
	}
	if err := checkModules(dir); err != nil {
		t.Errorf("all installed (the optional one absent): %v", err)
	}
	installModule(t, dir, "openai", "7.54.0")
	if err := checkModules(dir); err == nil || !strings.Contains(err.Error(), "e2e/node_modules/openai is 7.54.0, the lockfile pins 7.55.0") {
		t.Errorf("another version: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package-lock.json"), []byte(`{"lockfileVersion": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkModules(dir); err == nil || !strings.Contains(err.Error(), "lists no packages") {
		t.Errorf("a lockfile without packages: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package-lock.json"), []byte(`{"packages": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkModules(dir); err == nil || !strings.Contains(err.Error(), "e2e/package-lock.json") {
		t.Errorf("a broken lockfile: %v", err)
	}
}

// TestEnsureInstalledOnce has many callers, each with its own hold of the
// lock file (as separate test binaries have), find the packages missing at
// once: one install runs, the others find its work done.
func TestEnsureInstalledOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeLock(t, dir, pinned)
	lock := filepath.Join(t.TempDir(), "npm.lock")
	var runs, inside atomic.Int32
	install := func(context.Context) error {
		if inside.Add(1) != 1 {
			t.Error("two installs ran at once")
		}
		defer inside.Add(-1)
		runs.Add(1)
		for name, v := range pinned {
			installModule(t, dir, name, v)
			runtime.Gosched()
		}
		return nil
	}
	var wg sync.WaitGroup
	var installed atomic.Int32
	for range 8 {
		wg.Go(func() {
			did, err := ensureInstalled(dir, lock, install)
			if err != nil {
				t.Error(err)
			}
			if did {
				installed.Add(1)
			}
		})
	}
	wg.Wait()
	if runs.Load() != 1 || installed.Load() != 1 {
		t.Errorf("install ran %d times (%d reported it), want once", runs.Load(), installed.Load())
	}
}

func TestEnsureInstalledFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeLock(t, dir, pinned)
	lock := filepath.Join(t.TempDir(), "npm.lock")
	boom := errors.New("npm ci: network unreachable")
	if _, err := ensureInstalled(dir, lock, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("a failed install: %v, want its error", err)
	}
	_, err := ensureInstalled(dir, lock, func(context.Context) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "npm ci in e2e/ finished, but") {
		t.Errorf("an install that installs nothing: %v", err)
	}
}

// outcome is what a fakeTB saw: a skip, a failure or neither.
type outcome struct{ skipped, failed string }

// fakeTB records Skipf and Fatalf and ends the goroutine as testing does.
type fakeTB struct {
	testing.TB
	mu  sync.Mutex
	out outcome
}

func (f *fakeTB) Helper()                   {}
func (f *fakeTB) Logf(string, ...any)       {}
func (f *fakeTB) Fatal(args ...any)         { f.end(&f.out.failed, fmt.Sprint(args...)) }
func (f *fakeTB) Fatalf(s string, a ...any) { f.end(&f.out.failed, fmt.Sprintf(s, a...)) }
func (f *fakeTB) Skipf(s string, a ...any)  { f.end(&f.out.skipped, fmt.Sprintf(s, a...)) }

func (f *fakeTB) end(field *string, msg string) {
	f.mu.Lock()
	*field = msg
	f.mu.Unlock()
	runtime.Goexit()
}

// run calls fn with a fakeTB on a goroutine of its own and returns what
// it returned and what the fake saw.
func run(fn func(testing.TB) string) (string, outcome) {
	f := &fakeTB{}
	var got string
	done := make(chan struct{})
	go func() {
		defer close(done)
		got = fn(f)
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return got, f.out
}

// TestProgramPath runs without t.Parallel: it sets PATH and CI.
func TestProgramPath(t *testing.T) {
	bin := t.TempDir()
	t.Setenv("PATH", bin)
	exe := filepath.Join(bin, "fakeprog")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "sbinprog"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	missing := Program{Name: "nosuchprog", Install: "apt-get install nosuch", For: "the nosuch tests"}

	t.Setenv("CI", "false")
	for _, p := range []Program{{Name: "fakeprog"}, {Name: "sbinprog", Dirs: []string{other}}} {
		if got, o := run(p.Path); got == "" || o != (outcome{}) {
			t.Errorf("%s: %q %+v, want its path", p.Name, got, o)
		}
	}
	if _, o := run(missing.Path); !strings.Contains(o.skipped, "nosuchprog (needed for the nosuch tests) is missing") ||
		!strings.Contains(o.skipped, "install it: apt-get install nosuch") || o.failed != "" {
		t.Errorf("missing outside CI: %+v, want a skip naming the install command", o)
	}
	env := Program{Name: "envprog", EnvVar: "TOOLPOOL_TESTDEPS_PROG", For: "x", Install: "build.sh"}
	t.Setenv("TOOLPOOL_TESTDEPS_PROG", exe)
	if got, _ := run(env.Path); got != exe {
		t.Errorf("from %s: %q, want %s", env.EnvVar, got, exe)
	}
	t.Setenv("TOOLPOOL_TESTDEPS_PROG", filepath.Join(other, "gone"))
	if _, o := run(env.Path); !strings.Contains(o.skipped, "TOOLPOOL_TESTDEPS_PROG names envprog") {
		t.Errorf("a variable naming a missing file: %+v", o)
	}

	t.Setenv("CI", "true")
	if _, o := run(env.Path); !strings.Contains(o.failed, "CI must run x: install it first (build.sh)") || o.skipped != "" {
		t.Errorf("missing in CI, no package: %+v, want a failure", o)
	}
	if _, o := run(func(tb testing.TB) string { n, _ := NodeModules(tb); return n }); o.failed == "" {
		t.Errorf("no node on PATH in CI: %+v, want a failure", o)
	}
	t.Setenv("CI", "")
	if _, o := run(func(tb testing.TB) string { n, _ := NodeModules(tb); return n }); !strings.Contains(o.skipped, installNodeJS) {
		t.Errorf("no node on PATH outside CI: %+v, want a skip naming %q", o, installNodeJS)
	}
}

// TestNodeModules checks (installing, on a fresh clone) e2e's packages for
// real: the SDKs the e2e tests run are there at their pinned versions.
func TestNodeModules(t *testing.T) {
	t.Parallel()
	node, dir := NodeModules(t)
	if node == "" || filepath.Base(dir) != "node_modules" {
		t.Fatalf("node %q, modules %q", node, dir)
	}
	for _, pkg := range []string{"openai", "@modelcontextprotocol/server-everything"} {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(pkg), "package.json")); err != nil {
			t.Errorf("%s: %v", pkg, err)
		}
	}
	if err := checkModules(filepath.Dir(dir)); err != nil {
		t.Error(err)
	}
}
