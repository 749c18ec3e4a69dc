package docscheck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/docscheck"
	"github.com/toolpool/toolpool/internal/testdeps"
)

// root is the module's root, from this package's folder.
const root = "../.."

// inCI reports whether the test runs in CI (CI=true), where a missing
// compiler fails the test instead of skipping it.
func inCI() bool { return os.Getenv("CI") == "true" }

// docSnippets extracts the snippets of README.md and every docs/**/*.md,
// failing the test on a malformed directive.
func docSnippets(t *testing.T) map[string][]docscheck.Snippet {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]docscheck.Snippet{}
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		s, err := docscheck.Extract(f, src)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = s
	}
	return out
}

// programs returns the programs of lang's snippets of all the docs, and
// how many snippets of lang were skipped.
func programs(t *testing.T, lang ...docscheck.Lang) (progs []docscheck.Program, skipped int) {
	t.Helper()
	for _, snippets := range docSnippets(t) {
		for _, p := range docscheck.Programs(snippets) {
			for _, l := range lang {
				if p.Snippet.Lang == l {
					progs = append(progs, p)
				}
			}
		}
		for _, s := range snippets {
			if s.Skip != "" {
				skipped++
			}
		}
	}
	return progs, skipped
}

// writePrograms writes progs into dir, and a canary: a program with one
// known error, which the compiler must report (else it checked nothing).
func writePrograms(t *testing.T, dir string, progs []docscheck.Program, canaryName, canary string) {
	t.Helper()
	for _, p := range progs {
		if err := os.WriteFile(filepath.Join(dir, p.Name), []byte(p.Source), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, canaryName), []byte(canary), 0o644); err != nil {
		t.Fatal(err)
	}
}

// compileContext bounds one compiler run.
func compileContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestTypeScriptSnippets type-checks every TypeScript and JavaScript
// snippet of the docs with tsc --strict, under Node's own library only (no
// DOM: an agent runs in Node), against the SDKs e2e/package-lock.json
// pins (openai, @anthropic-ai/sdk, @google/genai, the MCP SDK).
func TestTypeScriptSnippets(t *testing.T) {
	t.Parallel()
	// e2e's pinned packages, installed from the lockfile when missing
	// (typescript and @types/node among them).
	_, modules := testdeps.NodeModules(t)
	tsc := filepath.Join(modules, ".bin", "tsc")
	progs, skipped := programs(t, docscheck.TypeScript, docscheck.JavaScript)
	if len(progs) == 0 {
		t.Fatal("the docs have no TypeScript snippet to check; has the extraction broken?")
	}

	dir := t.TempDir()
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	writePrograms(t, dir, progs, "canary.ts", "export const canary: number = \"not a number\";\n")
	files := []string{"canary.ts"}
	for _, p := range progs {
		files = append(files, p.Name)
	}
	writeJSON(t, filepath.Join(dir, "package.json"), map[string]any{"type": "module", "private": true})
	writeJSON(t, filepath.Join(dir, "tsconfig.json"), map[string]any{
		"compilerOptions": map[string]any{
			"strict": true, "noEmit": true,
			"target": "es2022", "module": "nodenext", "moduleResolution": "nodenext",
			"lib": []string{"es2022"}, "types": []string{"node"},
			"allowJs": true, "checkJs": true,
			// The SDKs' own declarations are theirs to check.
			"skipLibCheck": true,
		},
		"files": files,
	})

	cmd := exec.CommandContext(compileContext(t), tsc, "-p", dir, "--pretty", "false")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	var canaryErrs, others []string
	for line := range strings.Lines(string(out)) {
		switch {
		case strings.HasPrefix(line, "canary.ts("):
			canaryErrs = append(canaryErrs, line)
		case strings.TrimSpace(line) != "":
			others = append(others, line)
		}
	}
	if len(canaryErrs) == 0 {
		t.Fatalf("tsc did not report the canary's error, so it checked nothing (err %v):\n%s", err, out)
	}
	if len(others) > 0 {
		t.Errorf("the docs' TypeScript does not type-check (tsc --strict, lib es2022 + @types/node):\n%s",
			docscheck.MapDiagnostics(strings.Join(others, ""), progs))
	}
	t.Logf("%d TypeScript/JavaScript snippets type-checked, %d snippets marked skip", len(progs), skipped)
}

// TestPythonSnippets compiles every Python snippet of the docs with
// python3 -m py_compile: a syntax error fails.
func TestPythonSnippets(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		if inCI() {
			t.Fatalf("python3 is not installed: %v", err)
		}
		t.Skip("python3 is not installed: apt-get install python3")
	}
	progs, _ := programs(t, docscheck.Python)
	if len(progs) == 0 {
		t.Fatal("the docs have no Python snippet to check; has the extraction broken?")
	}
	dir := t.TempDir()
	writePrograms(t, dir, progs, "canary.py", "def broken(:\n")
	// python3 -m py_compile, in one process for all the files (python3 may
	// be a slow-starting shim) that goes on after a file that fails.
	args := []string{"-c", pyCompileAll, "canary.py"}
	for _, p := range progs {
		args = append(args, p.Name)
	}
	cmd := exec.CommandContext(compileContext(t), python, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONPYCACHEPREFIX="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "canary.py") {
		t.Fatalf("py_compile did not report the canary's syntax error, so it checked nothing (err %v):\n%s", err, out)
	}
	var others []string
	for _, block := range strings.Split(string(out), "File \"") {
		if strings.TrimSpace(block) != "" && !strings.HasPrefix(block, "canary.py") {
			others = append(others, "File \""+block)
		}
	}
	if len(others) > 0 {
		t.Errorf("the docs' Python does not compile (python3 -m py_compile):\n%s", docscheck.MapDiagnostics(strings.Join(others, ""), progs))
	}
	t.Logf("%d Python snippets compiled", len(progs))
}

// pyCompileAll is py_compile's main, going on after a file that fails.
const pyCompileAll = `import py_compile, sys
rc = 0
for f in sys.argv[1:]:
    try:
        py_compile.compile(f, doraise=True)
    except py_compile.PyCompileError as e:
        sys.stderr.write(e.msg + "\n")
        rc = 1
sys.exit(rc)
`

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
