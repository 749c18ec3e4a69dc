package opscmd

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/budget"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/pooltype"
)

func TestBudgetsCommands(t *testing.T) {
	t.Parallel()
	srv, _, j := natstest.StartProvisioned(t)
	url := srv.ClientURL()

	code, out, errOut := orch(t, "budgets", "ls", "--nats-url", url)
	if code != 0 || out != "" || !strings.Contains(errOut, "no budgets") {
		t.Fatalf("ls with none: exit %d, %q, %q", code, out, errOut)
	}
	code, out, errOut = orch(t, "budgets", "set", "acme.daily", "--nats-url", url, "--tenant", "acme", "--period", "day", "--limit", "3")
	if code != 0 || !strings.Contains(out, "budget acme.daily set: tenant acme, every tool, 3 calls per day") {
		t.Fatalf("set: exit %d: %s %s", code, out, errOut)
	}
	code, out, errOut = orch(t, "budgets", "set", "bot-search", "--nats-url", url, "--key", "bot", "--tools", "search, fetch",
		"--window", "90m", "--limit", "500", "--cost", "--soft", "0.5")
	if code != 0 || !strings.Contains(out, "key bot, search, fetch, 500 cost units per rolling 90m") {
		t.Fatalf("set --window: exit %d: %s %s", code, out, errOut)
	}

	// an orchestrator spends two calls of acme
	s, err := budget.New(budget.Config{JS: j, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop(t.Context()) }()
	c := &policy.Call{Tenant: "acme", Key: "bot", Tool: "search", Info: pooltype.ToolInfo{Cost: 4}}
	for range 2 {
		if _, err := s.Charge(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}

	code, out, _ = orch(t, "budgets", "ls", "--nats-url", url)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "BUDGET") {
		t.Fatalf("ls: exit %d:\n%s", code, out)
	}
	if f := strings.Fields(lines[1]); f[0] != "acme.daily" || f[3] != "*" || f[4] != "day" || f[5] != "3" || f[6] != "2" || f[7] != "1" {
		t.Errorf("ls row = %q", lines[1])
	}
	if !strings.Contains(lines[2], "search,fetch") || !strings.Contains(lines[2], "rolling 90m") || !strings.Contains(lines[2], "500 units") ||
		!strings.Contains(lines[2], " 8 ") {
		t.Errorf("ls row = %q", lines[2])
	}
	code, out, _ = orch(t, "budgets", "ls", "--nats-url", url, "--json")
	var list []struct {
		Name     string   `json:"name"`
		Tools    []string `json:"tools"`
		Window   string   `json:"window"`
		Unit     string   `json:"unit"`
		Soft     float64  `json:"soft"`
		Spent    int64    `json:"spent"`
		Left     int64    `json:"left"`
		ResetsIn float64  `json:"resets_in_seconds"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 || list[0].Spent != 2 || list[0].Left != 1 ||
		list[0].Soft != 0.8 || list[1].Window != "90m" || list[1].Unit != "cost units" || list[1].Spent != 8 || list[1].ResetsIn <= 0 {
		t.Errorf("ls --json: exit %d:\n%s", code, out)
	}

	code, out, _ = orch(t, "status", "--nats-url", url)
	if code != 0 || !strings.Contains(out, "SPENT/LIMIT") || !strings.Contains(out, "acme.daily") || !strings.Contains(out, "2/3") ||
		!strings.Contains(out, "8/500 units") {
		t.Errorf("status: exit %d:\n%s", code, out)
	}

	code, out, _ = orch(t, "budgets", "reset", "acme.daily", "--nats-url", url)
	if code != 0 || !strings.Contains(out, "budget acme.daily reset") {
		t.Fatalf("reset: exit %d: %s", code, out)
	}
	if st, _ := budget.ListStatus(t.Context(), j, time.Now()); len(st) != 2 || st[0].Spent != 0 || st[1].Spent != 8 {
		t.Errorf("after reset: %+v", st)
	}
	code, out, _ = orch(t, "budgets", "rm", "bot-search", "--nats-url", url)
	if code != 0 || !strings.Contains(out, "budget bot-search removed") {
		t.Fatalf("rm: exit %d: %s", code, out)
	}
	for _, args := range [][]string{{"rm", "bot-search"}, {"reset", "nope"}} {
		code, _, errOut := orch(t, append([]string{"budgets"}, append(args, "--nats-url", url)...)...)
		if code != 1 || !strings.Contains(errOut, "no budget named") {
			t.Errorf("%v: exit %d: %s", args, code, errOut)
		}
	}
}

func TestBudgetsSetUsage(t *testing.T) {
	t.Parallel()
	// no server: every one of these is refused before connecting
	url := "nats://127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"x", "--tenant", "a", "--period", "day", "--limit", "-3"}, "--limit must be at least 1, got -3"},
		{[]string{"x", "--tenant", "a", "--period", "day"}, "--limit is required"},
		{[]string{"x", "--tenant", "a", "--key", "k", "--period", "day", "--limit", "1"}, "--tenant or --key, not both"},
		{[]string{"x", "--period", "day", "--limit", "1"}, "--tenant or --key is required"},
		{[]string{"x", "--tenant", "a", "--period", "week", "--limit", "1"}, `--period "week"`},
		{[]string{"x", "--tenant", "a", "--limit", "1"}, "--period (minute, hour, day, month) or --window"},
		{[]string{"x", "--tenant", "a", "--period", "day", "--window", "1h", "--limit", "1"}, "--period or --window, not both"},
		{[]string{"x", "--tenant", "a", "--window", "30s", "--limit", "1"}, "--window 30s: must be whole seconds from 1m to 31d"},
		{[]string{"x", "--tenant", "a", "--window", "32d", "--limit", "1"}, "--window 32d"},
		{[]string{"x", "--tenant", "a", "--window", "soon", "--limit", "1"}, `--window "soon"`},
		{[]string{"x", "--tenant", "a", "--period", "day", "--limit", "1", "--soft", "0"}, "--soft must be above 0"},
		{[]string{"x", "--tenant", "a", "--period", "day", "--limit", "1", "--soft", "1.5"}, "--soft must be above 0"},
		{[]string{"x", "--tenant", "a", "--period", "day", "--limit", "1", "--tools", "ok,bad tool"}, `--tools: "bad tool"`},
		{[]string{"bad name", "--tenant", "a", "--period", "day", "--limit", "1"}, `NAME "bad name"`},
		{[]string{"x", "--tenant", "a", "--period", "day", "--limit", "many"}, `invalid value "many" for flag -limit`},
	} {
		code, _, errOut := orch(t, append([]string{"budgets", "set", "--nats-url", url}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("set %v: exit %d, want 2 and %q:\n%s", tc.args, code, tc.want, errOut)
		}
	}
	for _, args := range [][]string{{"budgets"}, {"budgets", "frob"}, {"budgets", "reset"}, {"budgets", "rm", "a", "b"}, {"budgets", "reset", "a/b"}} {
		if code, _, _ := orch(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
