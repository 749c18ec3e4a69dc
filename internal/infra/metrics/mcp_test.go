package metrics

import (
	"testing"

	"github.com/toolpool/toolpool/internal/promtest"
)

// TestMCP: sessions up, restarts and start failures by server, in a
// scrape promtool accepts.
func TestMCP(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	m, err := NewMCP(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.SessionUp("everything", false)
	m.SessionUp("everything", false)
	m.SessionDown("everything")
	m.SessionUp("everything", true)
	m.StartFailed("broken")
	fams, text := gather(t, reg)
	for _, c := range []struct {
		name, server string
		want         float64
	}{
		{"toolpool_mcp_sessions_up", "everything", 2},
		{"toolpool_mcp_sessions_up", "broken", 0},
		{"toolpool_mcp_session_restarts_total", "everything", 1},
		{"toolpool_mcp_start_failures_total", "broken", 1},
	} {
		if got := fams.Value(c.name, "server", c.server); got != c.want {
			t.Errorf("%s{server=%q} = %v, want %v", c.name, c.server, got, c.want)
		}
	}
	promtest.CheckMetrics(t, text)
}
