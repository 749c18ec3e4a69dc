package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsPolicyExample: the example catalog of docs/tools.md's "Cost,
// cache and approval" loads, and the two errors the page shows are the
// ones its edits give.
func TestDocsPolicyExample(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "tools.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "### Cost, cache and approval")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/tools.md has no yaml block under \"Cost, cache and approval\"")
	}
	opts := Options{LookPath: func(file string) (string, error) { return "/usr/local/bin/" + file, nil }}
	f, err := Parse("tools.yaml", []byte(block), opts)
	if err != nil {
		t.Fatalf("the example does not load: %v", err)
	}
	if got := strings.Join(f.Names(), ","); got != "search,write_file,run" {
		t.Errorf("the example's tools: %s", got)
	}
	for _, edit := range []struct{ old, new string }{
		{"idempotent: true ", "idempotent: false"},
		{`"db.*"`, `"db.["`},
	} {
		broken := strings.Replace(block, edit.old, edit.new, 1)
		if broken == block {
			t.Fatalf("the example has no %q", edit.old)
		}
		_, err := Parse("tools.yaml", []byte(broken), opts)
		if err == nil || !strings.Contains(section, "`"+err.Error()+"`") {
			t.Errorf("with %s for %s: %v; the page does not show this error", edit.new, edit.old, err)
		}
	}
}
