package e2e_test

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// updateScreenshots asks the tests to write their screenshots into docs/
// (as does TOOLPOOL_UPDATE_SCREENSHOTS=1); by default they go to the
// test's temporary folder, so running the tests leaves the checkout clean.
var updateScreenshots = flag.Bool("update-screenshots", false, "write the console's screenshots to docs/console/ (also TOOLPOOL_UPDATE_SCREENSHOTS=1)")

// shotsDir is where a test writes its screenshots: docs, the folder given,
// when asked to update them, else a temporary folder of t's.
func shotsDir(t *testing.T, docs string) string {
	t.Helper()
	if update, _ := strconv.ParseBool(os.Getenv("TOOLPOOL_UPDATE_SCREENSHOTS")); update || *updateScreenshots {
		return docs
	}
	return t.TempDir()
}
