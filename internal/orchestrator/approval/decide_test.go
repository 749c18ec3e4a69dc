package approval_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Bad decisions and ids are clear errors that name what is wrong, and
// change nothing.
func TestDecideBadInput(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, srv)
	ctx := ctxFor(t)
	d, err := a.s.Hold(ctx, call(`{"path": "/etc/group"}`, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, id, by, reason, via, want string
		is                              error
	}{
		{"no by", d.ID, "  ", "", approval.ViaCLI, "by: say who decides", approval.ErrInvalid},
		{"control by", d.ID, "al\x1bice", "", approval.ViaCLI, "by: \"al\\x1bice\" has control characters", approval.ErrInvalid},
		{"long by", d.ID, strings.Repeat("a", 129), "", approval.ViaCLI, "by: at most 128", approval.ErrInvalid},
		{"long reason", d.ID, "alice", strings.Repeat("r", 1001), approval.ViaCLI, "reason: at most 1000 characters, got 1001", approval.ErrInvalid},
		{"control reason", d.ID, "alice", "ok\nbut \x1b[2J", approval.ViaCLI, "reason: control characters", approval.ErrInvalid},
		{"bad via", d.ID, "alice", "", "email", `via: "email"; want cli, console or mcp`, approval.ErrInvalid},
		{"bad id", "ap-*", "alice", "", approval.ViaCLI, `approval "ap-*": no such approval`, approval.ErrNotFound},
		{"wildcard", ">", "alice", "", approval.ViaCLI, "no such approval", approval.ErrNotFound},
		{"unknown id", "ap-0123456789abcdef0123", "alice", "", approval.ViaCLI, "approval ap-0123456789abcdef0123: no such approval (decided ones are kept 168h0m0s)", approval.ErrNotFound},
	} {
		_, err := a.s.Decide(ctx, tc.id, true, tc.by, tc.reason, tc.via)
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Decide: %v; want %q", tc.name, err, tc.want)
		}
	}
	rec, err := a.s.Get(ctx, d.ID)
	if err != nil || rec.State != approval.StatePending {
		t.Fatalf("after the bad decisions: %+v, %v; want still pending", rec, err)
	}
	if _, err := a.s.Get(ctx, "ap-nothex!!"); !errors.Is(err, approval.ErrNotFound) {
		t.Fatalf("Get of a malformed id: %v", err)
	}
}

// Required follows the tool's rule; no rule, or an input that is not a
// JSON object (the dispatcher refuses it), needs no approval.
func TestRequired(t *testing.T) {
	srv := natstest.Start(t)
	s := start(t, srv).s
	rule := &tools.ApprovalRule{When: []tools.ApprovalMatch{{Field: "input.path", Pattern: "/etc/**"}}}
	for _, tc := range []struct {
		rule  *tools.ApprovalRule
		input string
		want  bool
	}{
		{nil, `{"path": "/etc/passwd"}`, false},
		{&tools.ApprovalRule{}, `{}`, true},
		{&tools.ApprovalRule{}, ` {"a": 1}`, true},
		{&tools.ApprovalRule{}, `[1]`, false},
		{&tools.ApprovalRule{}, `{"a":`, false},
		{&tools.ApprovalRule{}, ``, false},
		{rule, `{"path": "/etc/ssh/sshd_config"}`, true},
		{rule, `{"path": "/home/a"}`, false},
		{rule, `{"other": "/etc/x"}`, false},
	} {
		c := &policy.Call{Tool: "t", Input: json.RawMessage(tc.input), Info: pooltype.ToolInfo{Approval: tc.rule}}
		if got := s.Required(c); got != tc.want {
			t.Errorf("Required(rule %v, %s) = %v, want %v", tc.rule, tc.input, got, tc.want)
		}
	}
}

// ID and Binding: stable, valid, and bound to what they name.
func TestIDAndBinding(t *testing.T) {
	in := []byte(`{"b": 1, "a": {"y": 2.50, "x": "<&>"}}`)
	id := approval.ID("acme", "s", "toolu_1", "deploy", in)
	if !approval.ValidID(id) || !strings.HasPrefix(id, "ap-") || len(id) != 23 {
		t.Fatalf("ID = %q", id)
	}
	if id != approval.ID("acme", "s", "toolu_1", "deploy", []byte(`{"b":1,"a":{"y":2.50,"x":"<&>"}}`)) {
		t.Fatal("whitespace changed the id")
	}
	for _, other := range []string{
		approval.ID("globex", "s", "toolu_1", "deploy", in),
		approval.ID("acme", "t", "toolu_1", "deploy", in),
		approval.ID("acme", "s", "toolu_2", "deploy", in),
		approval.ID("acme", "s", "toolu_1", "deploy2", in),
		approval.ID("acme", "s", "toolu_1", "deploy", []byte(`{"b": 2}`)),
	} {
		if other == id {
			t.Fatalf("another call has the id %s", id)
		}
	}
	b := approval.Binding("acme", "deploy", in)
	if len(b) != 64 || b != approval.Binding("acme", "deploy", []byte(`{"a":{"x":"<&>","y":2.50},"b":1}`)) {
		t.Fatalf("key order changed the binding: %s", b)
	}
	for _, other := range []string{
		approval.Binding("acme", "deploy", []byte(`{"a":{"x":"<&>","y":2.5},"b":1}`)), // numbers as written
		approval.Binding("globex", "deploy", in),
		approval.Binding("acme", "deploy2", in),
	} {
		if other == b {
			t.Fatal("a different tenant, tool or input has the same binding")
		}
	}
	for _, bad := range []string{"", "ap-", "ap-0123456789abcdef012", "ap-0123456789ABCDEF0123", "xx-0123456789abcdef0123", "ap-0123456789abcdef012g"} {
		if approval.ValidID(bad) {
			t.Errorf("ValidID(%q) = true", bad)
		}
	}
}

// List: pending first, the soonest deadline first; with all, then the
// decided ones, the newest first; a pending record past its deadline is
// listed timed out.
func TestList(t *testing.T) {
	srv := natstest.Start(t)
	ctx := ctxFor(t)
	var now atomic.Int64 // the clock, read by the store's sweep too
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	now.Store(time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC).UnixNano())
	r := &replica{js: jsOn(t, srv), m: newCounts(), log: &natstest.LockedBuffer{}}
	cfg := config(r.js, r.log, r.m)
	cfg.Now = clock
	s, err := approval.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(ctx) })

	hold := func(input string, timeout time.Duration) string {
		d, err := s.Hold(ctx, call(input, timeout))
		if err != nil {
			t.Fatal(err)
		}
		return d.ID
	}
	late := hold(`{"n": 1}`, 3*time.Hour)
	soon := hold(`{"n": 2}`, time.Hour)
	expired := hold(`{"n": 3}`, time.Minute)
	first := hold(`{"n": 4}`, 2*time.Hour)
	second := hold(`{"n": 5}`, 2*time.Hour)
	now.Add(int64(10 * time.Minute))
	if _, err := s.Decide(ctx, first, true, "alice", "", approval.ViaConsole); err != nil {
		t.Fatal(err)
	}
	now.Add(int64(time.Minute))
	if _, err := s.Decide(ctx, second, false, "bob", "no", approval.ViaMCP); err != nil {
		t.Fatal(err)
	}
	ids := func(all bool) []string {
		list, err := s.List(ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, len(list))
		for i, r := range list {
			out[i] = r.ID + ":" + string(r.State)
		}
		return out
	}
	want := []string{soon + ":pending", late + ":pending"}
	if got := ids(false); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("List = %v, want %v", got, want)
	}
	want = append(want, second+":denied", first+":approved", expired+":timed_out")
	if got := ids(true); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("List(all) = %v, want %v", got, want)
	}
}

// A Store used before Start says so, instead of failing obscurely.
func TestNotStarted(t *testing.T) {
	srv := natstest.Start(t)
	s, err := approval.New(approval.Config{JS: jsOn(t, srv)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	if _, err := s.Hold(ctx, call(`{}`, 0)); !errors.Is(err, approval.ErrNotStarted) {
		t.Errorf("Hold: %v", err)
	}
	if _, err := s.Get(ctx, "ap-0123456789abcdef0123"); !errors.Is(err, approval.ErrNotStarted) {
		t.Errorf("Get: %v", err)
	}
	if _, err := s.List(ctx, true); !errors.Is(err, approval.ErrNotStarted) {
		t.Errorf("List: %v", err)
	}
	if _, err := s.Decide(ctx, "ap-0123456789abcdef0123", true, "a", "", approval.ViaCLI); !errors.Is(err, approval.ErrNotStarted) {
		t.Errorf("Decide: %v", err)
	}
	if _, err := approval.Open(ctx, approval.Config{JS: jsOn(t, srv)}); !errors.Is(err, approval.ErrNoBucket) {
		t.Errorf("Open before any bucket: %v", err)
	}
	if _, err := approval.New(approval.Config{}); err == nil || !strings.Contains(err.Error(), "Config.JS is required") {
		t.Errorf("New without JS: %v", err)
	}
	if _, err := approval.New(approval.Config{JS: jsOn(t, srv), Retention: time.Second}); err == nil || !strings.Contains(err.Error(), "Config.Retention") {
		t.Errorf("New with a second's retention: %v", err)
	}
}
