// Package testdeps gives tests what they need from outside Go — e2e's
// pinned npm packages, Chromium, promtool, HAProxy, Jaeger — the same way
// everywhere, so that `go test ./...` alone works on a fresh clone:
//
//   - e2e's npm packages are installed from e2e/package-lock.json (npm ci)
//     when any is missing, once per test binary, one binary at a time;
//   - a missing program is installed when CI=true (with apt-get, as root),
//     and otherwise the test skips with a message naming the one command
//     that installs it. In CI a program that cannot be had fails the test:
//     CI must run every test.
//
// Use:
//
//	node, modules := testdeps.NodeModules(t)
//	chromium := testdeps.Chromium.Path(t)
package testdeps

import (
	"os"
	"strconv"
)

// InCI reports whether the CI environment variable is true: then a test
// whose dependency cannot be had fails instead of skipping.
func InCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}
