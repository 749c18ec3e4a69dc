package opscmd

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/tools"
)

// approvalsStore starts an orchestrator's approval store on the server at
// url; the test's cleanup stops it.
func approvalsStore(t *testing.T, url string) *approval.Store {
	t.Helper()
	j, err := js.New(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	s, err := approval.New(approval.Config{JS: j, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

// holdCall holds a call to tool with input for tenant acme.
func holdCall(t *testing.T, s *approval.Store, id, tool, input string) string {
	t.Helper()
	d, err := s.Hold(t.Context(), &policy.Call{
		Tenant: "acme", Session: "sess-9", ID: id, Tool: tool, Input: json.RawMessage(input),
		Info: pooltype.ToolInfo{Approval: &tools.ApprovalRule{Timeout: time.Hour}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return d.ID
}

// TestApprovalsCommands: ls, show, approve and deny against an
// orchestrator's store, with the errors an operator meets.
func TestApprovalsCommands(t *testing.T) {
	srv := natstest.Start(t)
	url := srv.ClientURL()

	// No orchestrator created the bucket yet: nothing pending, exit 0.
	code, out, errOut := orch(t, "approvals", "ls", "--nats-url", url)
	if code != 0 || out != "" || !strings.Contains(errOut, "no pending approvals") {
		t.Fatalf("ls before any bucket: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = orch(t, "approvals", "ls", "--nats-url", url, "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("ls --json before any bucket: exit %d %q", code, out)
	}

	s := approvalsStore(t, url)
	write := holdCall(t, s, "toolu_w", "write_file", `{"path": "/etc/hosts", "content": "127.0.0.1 db"}`)
	run := holdCall(t, s, "toolu_r", "run", `{"cmd": "rm -rf /tmp/x"}`)

	code, out, errOut = orch(t, "approvals", "ls", "--nats-url", url)
	if code != 0 || !strings.Contains(out, write) || !strings.Contains(out, run) || !strings.Contains(out, "write_file") ||
		!strings.Contains(out, "acme") || !strings.Contains(out, "sess-9") || !strings.Contains(out, "in 59m") {
		t.Fatalf("ls: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = orch(t, "approvals", "show", "--nats-url", url, write)
	for _, want := range []string{"approval " + write + ": pending, times out in 59m", "tool:", "write_file", "tenant:", "acme",
		"call id:", "toolu_w", "binding:", "sha256:" + approval.Binding("acme", "write_file", []byte(`{"path":"/etc/hosts","content":"127.0.0.1 db"}`)),
		"input:\n  {\n    \"path\": \"/etc/hosts\",\n    \"content\": \"127.0.0.1 db\"\n  }"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q: exit %d\n%s%s", want, code, out, errOut)
		}
	}

	code, out, errOut = orch(t, "approvals", "approve", "--nats-url", url, write, "--as", "alice", "--reason", "ticket 7")
	if code != 0 || !strings.Contains(out, "approved "+write+": write_file for tenant acme, session sess-9, call toolu_w, by alice") ||
		!strings.Contains(errOut, `msg="approval decided"`) || !strings.Contains(errOut, "by=alice") || !strings.Contains(errOut, "via=cli") {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = orch(t, "approvals", "deny", "--nats-url", url, write, "--as", "bob")
	if code != 1 || !strings.Contains(errOut, "orchestrator approvals deny: approval "+write+" was already approved by alice at ") {
		t.Fatalf("a second decision: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = orch(t, "approvals", "deny", "--nats-url", url, "--reason", "not on a Friday", "--json", run, "--as", "carol")
	var rec approval.Record
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec.State != approval.StateDenied || rec.Reason != "not on a Friday" ||
		rec.DecidedBy != "carol" || rec.Via != approval.ViaCLI {
		t.Fatalf("deny --json: exit %d\n%s%s", code, out, errOut)
	}

	// Nothing pending now; --all lists both decisions, the newest first.
	code, _, errOut = orch(t, "approvals", "ls", "--nats-url", url)
	if code != 0 || !strings.Contains(errOut, "no pending approvals") {
		t.Fatalf("ls after the decisions: exit %d\n%s", code, errOut)
	}
	code, out, _ = orch(t, "approvals", "ls", "--nats-url", url, "--all", "--json")
	var list []approval.Record
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 || list[0].ID != run || list[1].ID != write {
		t.Fatalf("ls --all --json: exit %d\n%s", code, out)
	}
	code, out, _ = orch(t, "approvals", "show", "--nats-url", url, run)
	if code != 0 || !strings.Contains(out, "denied by carol") || !strings.Contains(out, "via cli") || !strings.Contains(out, "not on a Friday") {
		t.Fatalf("show of a denied one: exit %d\n%s", code, out)
	}

	// Mistakes: exit 2 for the command line, 1 for an approval that is not there.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"show", "12"}, 2, `"12" is not an approval id (ap- and 20 hex characters`},
		{[]string{"approve", "ap-*"}, 2, "is not an approval id"},
		{[]string{"approve", "ap-0123456789abcdef0123", "--as", "alice"}, 1, "approval ap-0123456789abcdef0123: no such approval"},
		{[]string{"deny", run, "--as", ""}, 2, "--as: say who decides"},
		{[]string{"deny", run, "--as", "x", "--reason", strings.Repeat("r", 1001)}, 2, "--reason: at most 1000 characters, got 1001"},
		{[]string{"approve"}, 2, "usage: orchestrator approvals approve"},
		{[]string{"show", run, write}, 2, "unexpected argument"},
	} {
		code, out, errOut := orch(t, append(append([]string{"approvals"}, tc.args...), "--nats-url", url)...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s%s", tc.args, code, tc.code, tc.want, out, errOut)
		}
	}
}

// TestApprovalsHeldAgain: an approval is for one run. show tells when
// the approved call was let through; after the window of its use the
// call sent again is held again, ls lists it pending, show lists the
// spent approval, and approve decides it again.
func TestApprovalsHeldAgain(t *testing.T) {
	srv := natstest.Start(t)
	url := srv.ClientURL()
	j, err := js.New(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	const window = time.Second
	s, err := approval.New(approval.Config{JS: j, Logger: natstest.Logger(t), ResultsMaxAge: window})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	c := &policy.Call{
		Tenant: "acme", Session: "sess-9", ID: "toolu_again", Tool: "deploy", Input: json.RawMessage(`{"env":"prod"}`),
		Info: pooltype.ToolInfo{Approval: &tools.ApprovalRule{Timeout: time.Hour}},
	}
	id := holdCall(t, s, c.ID, c.Tool, string(c.Input))
	if code, out, errOut := orch(t, "approvals", "approve", "--nats-url", url, id, "--as", "alice", "--reason", "ticket 7"); code != 0 {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errOut)
	}
	if d, err := s.Use(t.Context(), c, id); err != nil || d.State != policy.Approved {
		t.Fatalf("Use = %+v, %v", d, err)
	}
	code, out, errOut := orch(t, "approvals", "show", "--nats-url", url, id)
	if code != 0 || !strings.Contains(out, "approved by alice") || !strings.Contains(out, "let through:") ||
		strings.Contains(out, "approved before") {
		t.Fatalf("show of a used approval: exit %d\n%s%s", code, out, errOut)
	}

	used, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(used.Written.Add(window)) + 200*time.Millisecond)
	if d, err := s.Hold(t.Context(), c); err != nil || d.State != policy.Pending {
		t.Fatalf("Hold after the window = %+v, %v; want Pending", d, err)
	}
	code, out, errOut = orch(t, "approvals", "ls", "--nats-url", url)
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "pending") {
		t.Fatalf("ls of the call held again: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = orch(t, "approvals", "show", "--nats-url", url, id)
	if code != 0 || !strings.Contains(out, ": pending, times out in ") || !strings.Contains(out, "approved before") ||
		!strings.Contains(out, "approved by alice via cli at ") || !strings.Contains(out, ": ticket 7") || strings.Contains(out, "let through:") {
		t.Fatalf("show of the call held again: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = orch(t, "approvals", "approve", "--nats-url", url, id, "--as", "bob", "--json")
	var rec approval.Record
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec.State != approval.StateApproved || rec.DecidedBy != "bob" ||
		len(rec.Previous) != 1 || rec.Previous[0].ApprovedBy != "alice" {
		t.Fatalf("approving the call held again: exit %d\n%s%s", code, out, errOut)
	}
}
