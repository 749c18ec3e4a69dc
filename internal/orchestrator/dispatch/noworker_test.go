package dispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// idleCatalog serves echo; "paused" is known but has no live worker.
type idleCatalog struct{}

func (idleCatalog) Lookup(_ context.Context, name string) (ToolInfo, bool) {
	switch name {
	case "echo":
		return ToolInfo{Name: name}, true
	case "paused":
		return ToolInfo{Name: name, NoWorker: true}, false
	}
	return ToolInfo{}, false
}

func (idleCatalog) Names(context.Context) []string { return []string{"echo"} }

func TestDispatchKnownToolWithoutWorker(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.Catalog = idleCatalog{} })
	res, err := b.d.Dispatch(timeout(t, 5*time.Second), "s", []envelope.ToolUseBlock{
		use("toolu_p", "paused", `{}`), use("toolu_u", "nope", `{}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	p, u := res[0], res[1]
	if !p.IsError || p.Class != envelope.ClassTransient || p.Code != CodeNoWorker ||
		p.Content.Text() != classify.NoWorkerMessage("paused", []string{"echo"}) {
		t.Errorf("known tool without a worker: %+v %q", p, p.Content.Text())
	}
	if want := "No worker serves the tool paused right now"; !strings.HasPrefix(p.Content.Text(), want) ||
		!strings.HasSuffix(p.Content.Text(), "Tools available now: echo.") {
		t.Errorf("content %q", p.Content.Text())
	}
	if !u.IsError || u.Code != classify.CodeUnknownTool {
		t.Errorf("unknown tool: %+v", u)
	}
	if n := streamMsgs(t, b.js, jetstream.StreamCalls); n != 0 {
		t.Errorf("TOOL_CALLS holds %d messages, want 0", n)
	}
	if got := classify.NoWorkerMessage("x", nil); !strings.HasSuffix(got, "No tools are available right now.") {
		t.Errorf("no tools: %q", got)
	}
}
