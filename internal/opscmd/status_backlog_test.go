package opscmd

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
)

// TestStatusShowsTheBacklog: a tool with calls queued and no live worker
// shows its oldest queued call's age and "stalled", in the table and in
// the JSON (added to the fields it had).
func TestStatusShowsTheBacklog(t *testing.T) {
	t.Parallel()
	srv, _, j := natstest.StartProvisioned(t)
	if _, err := jetstream.EnsureConsumer(t.Context(), j, jetstream.ConsumerSpec{Tool: "orphan"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := j.Publish(t.Context(), jetstream.CallSubject("orphan"), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := orch(t, "status", "--nats-url", srv.ClientURL())
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < 2 || !strings.HasSuffix(lines[0], "OLDEST QUEUED  BACKLOG") {
		t.Fatalf("status: exit %d:\n%s\n%s", code, out, errOut)
	}
	if f := strings.Fields(lines[1]); f[0] != "orphan" || f[1] != "2" || !strings.HasSuffix(f[len(f)-2], "s") || f[len(f)-1] != "stalled" {
		t.Errorf("row %q", lines[1])
	}
	code, out, _ = orch(t, "status", "--json", "--nats-url", srv.ClientURL())
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 1 {
		t.Fatalf("status --json: exit %d, %v: %s", code, err, out)
	}
	r := rows[0]
	if r["tool"] != "orphan" || r["pending"] != 2.0 || r["backlog"] != "stalled" ||
		!strings.Contains(r["backlog_reason"].(string), "no live worker") || r["oldest_age_s"].(float64) <= 0 {
		t.Errorf("status --json row %v", r)
	}
	if code, _, errOut := orch(t, "status", "--backlog-age", "0", "--nats-url", srv.ClientURL()); code != 2 || !strings.Contains(errOut, "--backlog-age") {
		t.Errorf("--backlog-age 0: exit %d, %q", code, errOut)
	}
}
