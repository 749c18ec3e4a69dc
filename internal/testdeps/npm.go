package testdeps

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/testbin"
)

// npmTimeout bounds one npm ci: from npm's cache it takes seconds, with
// every package downloaded well under a minute.
const npmTimeout = 5 * time.Minute

// installNodeJS is the command a skipped test names when Node.js is
// missing.
const installNodeJS = "apt-get install nodejs npm (Node.js 20 or later)"

// modules remembers, per e2e directory, the outcome of the one check (and
// install) a test binary makes, so that parallel tests wait for it once.
var modules struct {
	mu   sync.Mutex
	done map[string]error
}

// NodeModules returns node and e2e/node_modules, with every package that
// e2e/package-lock.json pins installed at its version: when one is missing
// or at another version, it runs `npm ci --ignore-scripts --no-audit
// --no-fund` in e2e/ first. A lock file serialises test binaries (go test
// runs several at once), and each binary checks once. Without node or npm
// the test fails when CI=true and skips otherwise; an install that fails
// fails the test with npm's output.
func NodeModules(t testing.TB) (node, dir string) {
	t.Helper()
	root, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	node, err = exec.LookPath("node")
	if err == nil {
		var npm string
		if npm, err = exec.LookPath("npm"); err == nil {
			e2e := filepath.Join(root, "e2e")
			if err := ensureModules(t, npm, e2e); err != nil {
				t.Fatal(err)
			}
			return node, filepath.Join(e2e, "node_modules")
		}
	}
	unavailable(t, fmt.Sprintf("Node.js (node and npm) runs e2e's npm packages, and %v", err), installNodeJS)
	return "", ""
}

// ensureModules checks (and installs) e2e's packages once per test binary.
func ensureModules(t testing.TB, npm, e2e string) error {
	t.Helper()
	modules.mu.Lock()
	defer modules.mu.Unlock()
	if err, ok := modules.done[e2e]; ok {
		return err
	}
	start := time.Now()
	installed, err := ensureInstalled(e2e, lockPath("npm", e2e), func(ctx context.Context) error {
		return npmCI(ctx, npm, e2e)
	})
	if installed && err == nil {
		t.Logf("installed e2e's npm packages from e2e/package-lock.json (npm ci, %v)", time.Since(start).Round(time.Second))
	}
	if modules.done == nil {
		modules.done = make(map[string]error)
	}
	modules.done[e2e] = err
	return err
}

// lockPath is the lock file serialising the test binaries that install
// kind for key, in the temporary directory, not in the checkout.
func lockPath(kind, key string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	return filepath.Join(os.TempDir(), fmt.Sprintf("toolpool-testdeps-%s-%x.lock", kind, h.Sum64()))
}

// ensureInstalled checks e2e's packages under the lock and, when one is
// missing, runs install and checks again. installed reports that install
// ran.
func ensureInstalled(e2e, lock string, install func(context.Context) error) (installed bool, err error) {
	unlock, lerr := testbin.LockFile(lock)
	if lerr != nil {
		if err := checkModules(e2e); err != nil {
			return false, fmt.Errorf("%v, and the tests cannot install it here (%v): run `cd e2e && npm ci`", err, lerr)
		}
		return false, nil
	}
	defer unlock()
	if checkModules(e2e) == nil {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), npmTimeout)
	defer cancel()
	if err := install(ctx); err != nil {
		return true, err
	}
	if err := checkModules(e2e); err != nil {
		return true, fmt.Errorf("npm ci in e2e/ finished, but %v", err)
	}
	return true, nil
}

// npmCI runs npm ci in dir: exactly the lockfile's packages, no install
// scripts.
func npmCI(ctx context.Context, npm, dir string) error {
	cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		if len(out) > 4000 {
			out = append([]byte("…"), out[len(out)-4000:]...)
		}
		return fmt.Errorf("installing e2e's npm packages from the lockfile (npm ci in e2e/): %v\n%s", err, out)
	}
	return nil
}

// lockEntry is what the check reads of a package in package-lock.json.
type lockEntry struct {
	Version  string `json:"version"`
	Optional bool   `json:"optional"`
	Link     bool   `json:"link"`
}

// checkModules reports the first package of e2e/package-lock.json that is
// not installed in e2e/node_modules at its pinned version (optional ones,
// such as another platform's binaries, may be absent).
func checkModules(e2e string) error {
	data, err := os.ReadFile(filepath.Join(e2e, "package-lock.json"))
	if err != nil {
		return err
	}
	var lock struct {
		Packages map[string]lockEntry `json:"packages"`
	}
	if err := json.Unmarshal(data, &lock); err != nil {
		return fmt.Errorf("e2e/package-lock.json: %v", err)
	}
	var problems []string
	for key, want := range lock.Packages {
		if !strings.HasPrefix(key, "node_modules/") || want.Optional || want.Link {
			continue
		}
		if p := checkModule(e2e, key, want.Version); p != "" {
			problems = append(problems, p)
		}
	}
	switch slices.Sort(problems); len(problems) {
	case 0:
		if len(lock.Packages) <= 1 {
			return fmt.Errorf("e2e/package-lock.json lists no packages (lockfileVersion 2 or later has them)")
		}
		return nil
	case 1:
		return fmt.Errorf("e2e's npm packages are not installed: %s", problems[0])
	default:
		return fmt.Errorf("e2e's npm packages are not installed: %s (and %d more)", problems[0], len(problems)-1)
	}
}

// checkModule describes what is wrong with the package installed at key
// (a lockfile key, node_modules/…), or returns "".
func checkModule(e2e, key, version string) string {
	data, err := os.ReadFile(filepath.Join(e2e, filepath.FromSlash(key), "package.json"))
	if err != nil {
		return "e2e/" + key + " is missing"
	}
	var got struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		return fmt.Sprintf("e2e/%s/package.json: %v", key, err)
	}
	if version != "" && got.Version != version {
		return fmt.Sprintf("e2e/%s is %s, the lockfile pins %s", key, got.Version, version)
	}
	return ""
}
