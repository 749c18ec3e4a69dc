package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
)

// Issue 24 (spend, reuse, consent) with every part a process of its own:
// a nats-server, two `orchestrator serve` replicas on it (r1, r2), a
// worker process, and the webhook tools behind it counting their own
// executions (policy_harness_test.go). The budgets, the cache and the
// approvals are fleet-wide: what one replica admits, stores or holds, the
// other sees.

// TestPolicyAcrossReplicas: a shared budget admits exactly its limit under
// concurrent load through both replicas; a cached result is answered by
// the other replica; identical calls in flight run once; a cached result
// expires; a bad budget is refused naming its flag.
func TestPolicyAcrossReplicas(t *testing.T) {
	t.Parallel()
	s := startPolicyStack(t)
	t.Run("shared budget", func(t *testing.T) { t.Parallel(); testSharedBudget(t, s) })
	t.Run("cache across replicas", func(t *testing.T) { t.Parallel(); testCacheAcrossReplicas(t, s) })
	t.Run("coalescing", func(t *testing.T) { t.Parallel(); testCoalescing(t, s) })
	t.Run("cache ttl", func(t *testing.T) { t.Parallel(); testCacheTTL(t, s) })
	t.Run("key budget in cost units", func(t *testing.T) { t.Parallel(); testKeyBudget(t, s) })
	t.Run("bad budgets", func(t *testing.T) { t.Parallel(); testBadBudgets(t, s) })
}

// budgetPeriod is the period flags of the test's budgets and the words
// the model reads for it: a calendar day, or, when the day ends within
// the next five minutes (so that the test would straddle the reset), a
// rolling window of two hours. maxReset bounds a Retry-After; wantReset,
// when not nil, is what it should be about.
func budgetPeriod() (flags []string, words string, maxReset time.Duration, wantReset func() time.Duration) {
	now := time.Now().UTC()
	midnight := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	if midnight.Sub(now) < 5*time.Minute {
		return []string{"--window", "2h"}, "per rolling 2h", 2 * time.Hour, nil
	}
	return []string{"--period", "day"}, "per day", 24 * time.Hour,
		func() time.Duration { return time.Until(time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)) }
}

// checkRetryAfter checks the Retry-After of a 429: whole seconds, at the
// budget's reset.
func checkRetryAfter(t *testing.T, what string, got reply, maxReset time.Duration, wantReset func() time.Duration) {
	t.Helper()
	ra, err := strconv.Atoi(got.header.Get("Retry-After"))
	switch {
	case err != nil || ra < 1 || time.Duration(ra)*time.Second > maxReset+time.Second:
		t.Errorf("%s: Retry-After %q, want whole seconds in [1, %v]", what, got.header.Get("Retry-After"), maxReset)
	case wantReset != nil:
		if want := wantReset(); (time.Duration(ra)*time.Second - want).Abs() > 2*time.Minute {
			t.Errorf("%s: Retry-After %ds, want about %v (the end of the UTC day)", what, ra, want.Round(time.Second))
		}
	}
}

// waitBudgetKnown waits until every replica refuses the key's calls of
// probe: the budget probe (1 call of probe) is spent, and the replica
// knows it and every budget set before it.
func waitBudgetKnown(t *testing.T, s *policyStack, key, probe string) {
	t.Helper()
	for _, r := range s.replicas {
		pollEvery(t, 50*time.Millisecond, "replica "+r.name+" to know the budgets", func() bool {
			got, err := s.post(t.Context(), r, key, nil, "?timeout=1m", use("probe", `{}`))
			if err != nil || (got.status != http.StatusOK && got.status != http.StatusTooManyRequests) {
				t.Fatalf("a call of probe on %s: %v %d %s", r.name, err, got.status, got.body)
			}
			return got.results[0].IsError && strings.Contains(got.results[0].text(), `the budget "`+probe+`"`)
		})
	}
}

// testSharedBudget: a budget of 100 calls shared by both replicas, under
// 180 calls in 60 concurrent requests spread over them: exactly 100 run
// (counted by the tool), the others are answered budget_exhausted naming
// the budget, a request whose calls are all refused gets 429 with
// Retry-After at the reset; `budgets ls` shows the spend, `status` too,
// the metrics count the refusals, and `budgets reset` gives room again.
func testSharedBudget(t *testing.T, s *policyStack) {
	period, words, maxReset, wantReset := budgetPeriod()
	s.mustCLI(t, append([]string{"budgets", "set", "spend100", "--tenant", "spend", "--tools", "metered", "--limit", "100"}, period...)...)
	s.mustCLI(t, append([]string{"budgets", "set", "probe1", "--tenant", "spend", "--tools", "probe", "--limit", "1"}, period...)...)
	waitBudgetKnown(t, s, keySpend, "probe1")

	const requests, per = 60, 3
	replies := make([]reply, requests)
	errs := make([]error, requests)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			for i := range next {
				calls := make([]spec, per)
				for j := range calls {
					calls[j] = use("metered", fmt.Sprintf(`{"n":%d}`, i*per+j))
				}
				ctx, cancel := context.WithTimeout(context.Background(), waitLong)
				replies[i], errs[i] = s.post(ctx, s.replicas[i%2], keySpend, nil, "?timeout=1m", calls...)
				cancel()
			}
		})
	}
	for i := range requests {
		next <- i
	}
	close(next)
	wg.Wait()

	refusedPrefix := `The call to metered was not run: the budget "spend100" allows 100 calls ` + words
	ran, refused, noted, tooMany := 0, 0, 0, 0
	for i, got := range replies {
		if errs[i] != nil {
			t.Errorf("request %d: %v", i, errs[i])
			continue
		}
		all := true
		for j, res := range got.results {
			switch text := res.text(); {
			case res.IsError && strings.HasPrefix(text, refusedPrefix):
				refused++
			case !res.IsError && strings.HasPrefix(text, "metered run "):
				ran++
				all = false
				if strings.Contains(text, `Note: the budget "spend100"`) {
					noted++
				}
			default:
				all = false
				t.Errorf("request %d, call %d: is_error %v, %q; want a run of metered or %q…", i, j, res.IsError, text, refusedPrefix)
			}
		}
		switch {
		case all && got.status != http.StatusTooManyRequests:
			t.Errorf("request %d: every call over budget, answered %d; want 429", i, got.status)
		case all:
			tooMany++
			checkRetryAfter(t, fmt.Sprintf("request %d", i), got, maxReset, wantReset)
		case got.status != http.StatusOK:
			t.Errorf("request %d: some calls ran, answered %d; want 200", i, got.status)
		}
	}
	if ran != 100 || s.hook.count("metered") != 100 {
		t.Errorf("%d calls answered as run, %d executions at the tool; want exactly 100 (the budget)", ran, s.hook.count("metered"))
	}
	if refused != requests*per-100 {
		t.Errorf("%d calls refused by the budget; want %d", refused, requests*per-100)
	}
	if noted != 20 && noted != 21 {
		t.Errorf("%d results carry the budget's nearly-spent note; want those past 80 %% of 100 (20 or 21)", noted)
	}
	if tooMany == 0 {
		t.Error("no request was answered 429, though at least 20 came after the budget was spent")
	}
	t.Logf("%d ran, %d refused, %d requests answered 429, %d results with the note", ran, refused, tooMany, noted)

	// Spent: every request, on either replica, is refused whole.
	for _, r := range s.replicas {
		got := s.mustPost(t, r, keySpend, nil, http.StatusTooManyRequests, use("metered", `{"n":-1}`), use("metered", `{"n":-2}`))
		checkRetryAfter(t, "a request after the budget was spent, on "+r.name, got, maxReset, wantReset)
		refused += 2
	}
	if n := s.hook.count("metered"); n != 100 {
		t.Errorf("%d executions after the budget was spent; want 100", n)
	}
	pollEvery(t, 100*time.Millisecond, "toolpool_budget_refused_total to count the refusals", func() bool {
		return s.metricAll(t, "toolpool_budget_refused_total", `budget="spend100"`) >= float64(refused)
	})
	if n := s.metricAll(t, "toolpool_budget_refused_total", `budget="spend100"`); n != float64(refused) {
		t.Errorf("toolpool_budget_refused_total{budget=\"spend100\"} over both replicas = %v; want %d", n, refused)
	}

	checkBudgetSpent(t, s, "spend100", 100)
	checkBudgetSpent(t, s, "probe1", 1)
	if st := s.mustCLI(t, "status"); !strings.Contains(st.stdout, "spend100") {
		t.Errorf("orchestrator status does not show the budget spend100:\n%s", st.stdout)
	}

	s.mustCLI(t, "budgets", "reset", "spend100")
	checkBudgetSpent(t, s, "spend100", 0)
	got := s.mustPost(t, s.replicas[1], keySpend, nil, http.StatusOK,
		use("metered", `{"n":1001}`), use("metered", `{"n":1002}`), use("metered", `{"n":1003}`))
	for i, res := range got.results {
		if res.IsError || !strings.HasPrefix(res.text(), "metered run ") {
			t.Errorf("after budgets reset, call %d: is_error %v, %q; want a run", i, res.IsError, res.text())
		}
	}
	if n := s.hook.count("metered"); n != 103 {
		t.Errorf("%d executions after the reset and 3 calls; want 103", n)
	}
	checkBudgetSpent(t, s, "spend100", 3)
}

// testKeyBudget: a budget on one API key (its name), in cost units, of a
// tool that costs 3 per call: 10 units admit 3 calls (9 units), never a
// fourth (12); another key of the same tenant is not held by it.
func testKeyBudget(t *testing.T, s *policyStack) {
	period, words, maxReset, wantReset := budgetPeriod()
	s.mustCLI(t, append([]string{"budgets", "set", "nightly10", "--key", "nightly", "--tools", "costly", "--limit", "10", "--cost"}, period...)...)
	s.mustCLI(t, append([]string{"budgets", "set", "nightly-probe", "--key", "nightly", "--tools", "probe", "--limit", "1"}, period...)...)
	waitBudgetKnown(t, s, keyNightly, "nightly-probe")
	for i := range 3 {
		got := s.mustPost(t, s.replicas[i%2], keyNightly, nil, http.StatusOK, use("costly", fmt.Sprintf(`{"i":%d}`, i)))
		if res := got.results[0]; res.IsError || !strings.HasPrefix(res.text(), "costly run ") {
			t.Errorf("call %d of 3 (9 of 10 units): is_error %v, %q; want a run", i, res.IsError, res.text())
		}
	}
	got := s.mustPost(t, s.replicas[1], keyNightly, nil, http.StatusTooManyRequests, use("costly", `{"i":3}`))
	checkRetryAfter(t, "the fourth call (12 of 10 units)", got, maxReset, wantReset)
	want := `The call to costly was not run: the budget "nightly10" allows 10 cost units ` + words
	if res := got.results[0]; !res.IsError || !strings.HasPrefix(res.text(), want) {
		t.Errorf("the fourth call: is_error %v, %q; want %q…", res.IsError, res.text(), want)
	}
	other := s.mustPost(t, s.replicas[0], keyAdhoc, nil, http.StatusOK, use("costly", `{"i":4}`))
	if res := other.results[0]; res.IsError {
		t.Errorf("a call with another key of the tenant: %q; want a run (the budget is on the key nightly)", res.text())
	}
	if n := s.hook.count("costly"); n != 4 {
		t.Errorf("costly ran %d times; want 4 (3 with nightly, 1 with adhoc)", n)
	}
	checkBudgetSpent(t, s, "nightly10", 9)
}

// checkBudgetSpent checks `budgets ls --json` and `budgets ls` for the
// budget name with spent units spent of its limit.
func checkBudgetSpent(t *testing.T, s *policyStack, name string, spent int) {
	t.Helper()
	ls := s.mustCLI(t, "budgets", "ls", "--json")
	objs, err := jsonObjects(ls.stdout)
	if err != nil {
		t.Fatalf("budgets ls --json: %v\n%s", err, ls.stdout)
	}
	i := slices.IndexFunc(objs, func(o map[string]any) bool { return str(o, "name") == name })
	if i < 0 {
		t.Fatalf("budgets ls --json does not list %s:\n%s", name, ls.stdout)
	}
	if got := str(objs[i], "spent"); got != strconv.Itoa(spent) {
		t.Errorf("budgets ls --json: %s spent %s; want %d\n%s", name, got, spent, ls.stdout)
	}
	if text := s.mustCLI(t, "budgets", "ls").stdout; !strings.Contains(text, name) {
		t.Errorf("budgets ls does not show %s:\n%s", name, text)
	}
}

// testCacheAcrossReplicas: a result cached by r1 answers the same input
// on r2 (keys in another order, other whitespace) without running the
// tool; another tenant does not get it; Cache-Control: no-cache runs the
// tool again and replaces the entry; Toolpool-Cache tells each call's
// outcome in order.
func testCacheAcrossReplicas(t *testing.T, s *policyStack) {
	r1, r2 := s.replicas[0], s.replicas[1]
	in1 := `{"q":"alpha","opts":{"a":1,"b":[1,2]}}`
	in2 := "{ \"opts\" : {\"b\" : [ 1, 2 ],\n \"a\":1},\n  \"q\": \"alpha\" }"
	wantOutcomes := func(what string, got reply, want ...string) {
		t.Helper()
		if o := got.cacheOutcomes(); !slices.Equal(o, want) {
			t.Errorf("%s: Toolpool-Cache %q; want %q", what, got.header.Get("Toolpool-Cache"), strings.Join(want, ","))
		}
	}
	wantRun := func(what string, got reply, run int) string {
		t.Helper()
		res := got.results[0]
		if prefix := fmt.Sprintf("lookup run %d for ", run); res.IsError || !strings.HasPrefix(res.text(), prefix) {
			t.Errorf("%s: is_error %v, %q; want %q…", what, res.IsError, res.text(), prefix)
		}
		return res.text()
	}

	first := s.mustPost(t, r1, keyReuse, nil, http.StatusOK, use("lookup", in1))
	wantOutcomes("the first call, on r1", first, "miss")
	stored := wantRun("the first call, on r1", first, 1)

	second := s.mustPost(t, r2, keyReuse, nil, http.StatusOK, use("lookup", in2))
	wantOutcomes("the same input reordered, on r2", second, "hit")
	if second.results[0].IsError || second.results[0].text() != stored {
		t.Errorf("the hit on r2 answered %q; want the stored %q", second.results[0].text(), stored)
	}
	if n := s.hook.count("lookup"); n != 1 {
		t.Errorf("lookup ran %d times; want once (the second call is a hit)", n)
	}

	other := s.mustPost(t, r2, keyOther, nil, http.StatusOK, use("lookup", in1))
	wantOutcomes("the same input from another tenant", other, "miss")
	wantRun("the same input from another tenant", other, 2)

	noCache := http.Header{"Cache-Control": {"no-cache"}}
	fresh := s.mustPost(t, r2, keyReuse, noCache, http.StatusOK, use("lookup", in2))
	wantOutcomes("Cache-Control: no-cache", fresh, "bypass")
	replaced := wantRun("Cache-Control: no-cache", fresh, 3)

	again := s.mustPost(t, r1, keyReuse, nil, http.StatusOK, use("lookup", in1))
	wantOutcomes("after the bypass, on r1", again, "hit")
	if again.results[0].text() != replaced {
		t.Errorf("after the bypass r1 answered %q; want the replacing result %q", again.results[0].text(), replaced)
	}

	mixed := s.mustPost(t, r1, keyReuse, nil, http.StatusOK, use("lookup", `{"q":"beta"}`), use("plain", `{}`), use("lookup", in2))
	wantOutcomes("a turn of a new input, an uncached tool and a stored input", mixed, "miss", "-", "hit")
	if n := s.hook.count("lookup"); n != 4 {
		t.Errorf("lookup ran %d times; want 4 (alpha, alpha for another tenant, the bypass, beta)", n)
	}
	if n := s.metric(t, r2, "toolpool_cache_total", `tool="lookup"`, `outcome="hit"`); n < 1 {
		t.Errorf("toolpool_cache_total{tool=\"lookup\",outcome=\"hit\"} on r2 = %v; want at least 1", n)
	}
}

// testCoalescing: 50 identical calls of a cacheable tool that takes about
// a second, sent at once through both replicas, run the tool once; every
// caller gets its result, under its own call id.
func testCoalescing(t *testing.T, s *policyStack) {
	const n = 50
	var written atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	// The tool holds its execution until every request is sent (and at
	// least a second), so that they all arrive while it runs.
	ctx = wroteRequest(ctx, func() {
		if written.Add(1) == n {
			s.hook.releaseSlow()
		}
	})
	replies := make([]reply, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			replies[i], errs[i] = s.post(ctx, s.replicas[i%2], keyReuse, nil, "?timeout=1m", use("slowlookup", `{"q":"same"}`))
		})
	}
	wg.Wait()
	outcomes := map[string]int{}
	var text string
	for i, got := range replies {
		switch {
		case errs[i] != nil:
			t.Errorf("call %d: %v", i, errs[i])
			continue
		case got.status != http.StatusOK || got.results[0].IsError:
			t.Errorf("call %d: %d, is_error %v: %s", i, got.status, got.results[0].IsError, got.body)
			continue
		case text == "":
			text = got.results[0].text()
		case got.results[0].text() != text:
			t.Errorf("call %d answered %q; call 0 %q", i, got.results[0].text(), text)
		}
		o := got.cacheOutcomes()
		if len(o) != 1 || !slices.Contains([]string{"miss", "coalesced", "hit"}, o[0]) {
			t.Errorf("call %d: Toolpool-Cache %q; want miss, coalesced or hit", i, got.header.Get("Toolpool-Cache"))
			continue
		}
		outcomes[o[0]]++
	}
	if got := s.hook.count("slowlookup"); got != 1 {
		t.Errorf("50 identical calls at once ran the tool %d times; want once", got)
	}
	if !strings.HasPrefix(text, "slowlookup run 1 for ") {
		t.Errorf("the calls answered %q; want the tool's one run", text)
	}
	if outcomes["coalesced"] == 0 {
		t.Errorf("Toolpool-Cache outcomes %v: no call was told it waited for the identical call in flight", outcomes)
	}
	t.Logf("outcomes: %v", outcomes)
}

// testCacheTTL: a result cached for 2 s answers the same input until it
// expires, and not after: then the tool runs again, never before the TTL
// has passed since the result was stored.
func testCacheTTL(t *testing.T, s *policyStack) {
	start := time.Now()
	first := s.mustPost(t, s.replicas[0], keyReuse, nil, http.StatusOK, use("brief", `{"q":"ttl"}`))
	if o := first.cacheOutcomes(); !slices.Equal(o, []string{"miss"}) || !strings.HasPrefix(first.results[0].text(), "brief run 1 for ") {
		t.Fatalf("the first call: Toolpool-Cache %q, %q; want a miss and the tool's run", o, first.results[0].text())
	}
	stored := first.results[0].text()
	var expired time.Time
	polls := 0
	pollEvery(t, 100*time.Millisecond, "the cached result of brief to expire", func() bool {
		sent := time.Now()
		got := s.mustPost(t, s.replicas[polls%2], keyReuse, nil, http.StatusOK, use("brief", `{"q":"ttl"}`))
		polls++
		o := got.cacheOutcomes()
		switch {
		case slices.Equal(o, []string{"hit"}) && got.results[0].text() == stored:
			return false
		case slices.Equal(o, []string{"miss"}) && strings.HasPrefix(got.results[0].text(), "brief run 2 for "):
			expired = time.Now()
			return true
		case sent.Sub(start) < 2*time.Second:
			t.Fatalf("a call %v after the first (within the TTL): Toolpool-Cache %q, %q; want a hit of %q",
				sent.Sub(start).Round(time.Millisecond), o, got.results[0].text(), stored)
		default:
			t.Fatalf("Toolpool-Cache %q, %q; want a hit of %q or, once expired, a miss and the tool's second run", o, got.results[0].text(), stored)
		}
		return false
	})
	if d := expired.Sub(start); d < 2*time.Second {
		t.Errorf("a result cached for 2s was gone %v after the call that stored it began", d.Round(time.Millisecond))
	}
	if polls < 2 {
		t.Errorf("only %d calls before the result expired; want a hit before it (the machine may be too slow for a 2s TTL)", polls)
	}
	if n := s.hook.count("brief"); n != 2 {
		t.Errorf("brief ran %d times; want 2", n)
	}
}

// testBadBudgets: a bad `budgets set` is a usage error (exit 2) naming
// the flag, and creates nothing.
func testBadBudgets(t *testing.T, s *policyStack) {
	for _, tc := range []struct {
		name  string
		args  []string
		names []string // each must be in stderr
	}{
		{"negative limit", []string{"bad1", "--tenant", "spend", "--period", "day", "--limit", "-5"}, []string{"--limit"}},
		{"zero limit", []string{"bad2", "--tenant", "spend", "--period", "day", "--limit", "0"}, []string{"--limit"}},
		{"tenant and key", []string{"bad3", "--tenant", "spend", "--key", "k1", "--period", "day", "--limit", "5"}, []string{"--tenant", "--key"}},
		{"neither tenant nor key", []string{"bad4", "--period", "day", "--limit", "5"}, []string{"--tenant", "--key"}},
		{"unknown period", []string{"bad5", "--tenant", "spend", "--period", "fortnight", "--limit", "5"}, []string{"--period"}},
		{"period and window", []string{"bad6", "--tenant", "spend", "--period", "day", "--window", "90m", "--limit", "5"}, []string{"--period", "--window"}},
		{"window too short", []string{"bad7", "--tenant", "spend", "--window", "10s", "--limit", "5"}, []string{"--window"}},
		{"soft above 1", []string{"bad8", "--tenant", "spend", "--period", "day", "--limit", "5", "--soft", "1.5"}, []string{"--soft"}},
		{"bad name", []string{"bad name!", "--tenant", "spend", "--period", "day", "--limit", "5"}, []string{"bad name!"}},
	} {
		r := s.cli(t, append([]string{"budgets", "set"}, tc.args...)...)
		if r.code != 2 {
			t.Errorf("%s: exit %d; want 2\nstdout: %s\nstderr: %s", tc.name, r.code, r.stdout, r.stderr)
			continue
		}
		for _, want := range tc.names {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s: stderr does not name %s: %q", tc.name, want, r.stderr)
			}
		}
	}
	ls := s.cli(t, "budgets", "ls", "--json")
	if strings.Contains(ls.stdout, "bad") {
		t.Errorf("budgets ls lists a refused budget:\n%s", ls.stdout)
	}
}

// TestPolicyApprovals: a call of an `approval: always` tool, sent as an
// async call, waits in `approvals ls`; its replica is killed with SIGKILL
// and restarted; approved with the CLI, the call runs once and its result
// is read from the other replica; a denied call gets not_approved with
// the reason; an undecided one gets approval_timeout; a decision is made
// once.
func TestPolicyApprovals(t *testing.T) {
	t.Parallel()
	s := startPolicyStack(t)
	r1, r2 := s.replicas[0], s.replicas[1]

	async := http.Header{"Prefer": {"respond-async"}, "Toolpool-Session": {"approve-session-1"}}
	accepted := s.mustPost(t, r1, keyConsent, async, http.StatusAccepted, use("deploy", `{"service":"api","version":"1.2.3"}`))
	loc := accepted.header.Get("Location")
	if !strings.HasPrefix(loc, "/v1/tool_calls/") {
		t.Fatalf("202 with Location %q", loc)
	}
	held := waitApproval(t, s, "deploy", "1.2.3", "pending")
	id := str(held, "id")
	if !regexp.MustCompile(`^ap-[0-9a-f]{20}$`).MatchString(id) {
		t.Errorf("approval id %q; want ap- and 20 hex digits", id)
	}
	if str(held, "tenant") != "consent" || str(held, "session") != "approve-session-1" {
		t.Errorf("approvals ls: tenant %q, session %q; want consent, approve-session-1", str(held, "tenant"), str(held, "session"))
	}
	show := s.mustCLI(t, "approvals", "show", id)
	for _, want := range []string{"deploy", "consent", "approve-session-1", `"version": "1.2.3"`} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("approvals show %s does not show %s:\n%s", id, want, show.stdout)
		}
	}

	// The replica that holds the call dies; the approval survives it.
	s.restart(t, r1)
	if again := waitApproval(t, s, "deploy", "1.2.3", "pending"); str(again, "id") != id {
		t.Errorf("after the restart the call's approval is %q; want %q", str(again, "id"), id)
	}
	if n := s.hook.count("deploy"); n != 0 {
		t.Fatalf("deploy ran %d times before anyone approved it", n)
	}

	s.mustCLI(t, "approvals", "approve", id, "--as", "alice", "--reason", "ship it")
	res := pollAsync(t, s, r2, loc)
	if len(res.results) != 1 || res.results[0].IsError || !strings.HasPrefix(res.results[0].text(), "deploy run 1 for ") {
		t.Fatalf("the approved async call answered %s; want deploy's run", res.body)
	}
	decided := waitApproval(t, s, "deploy", "1.2.3", "approved")
	if str(decided, "decided_by") != "alice" || str(decided, "reason") != "ship it" {
		t.Errorf("the approved record: decided_by %q, reason %q; want alice, ship it", str(decided, "decided_by"), str(decided, "reason"))
	}
	second := s.cli(t, "approvals", "deny", id, "--as", "bob")
	if second.code == 0 || !strings.Contains(second.stderr, "already approved by alice") {
		t.Errorf("a second decision: exit %d, stderr %q; want an error saying it was already approved by alice", second.code, second.stderr)
	}

	testDenied(t, s)
	testApprovalTimeout(t, s)
	if n := s.hook.count("deploy"); n != 1 {
		t.Errorf("deploy ran %d times; want once (approved once, denied once)", n)
	}
}

// testDenied: a synchronous call held for approval and denied is answered
// not_approved with the reason, and does not run.
func testDenied(t *testing.T, s *policyStack) {
	t.Helper()
	call := use("deploy", `{"service":"db","version":"9.9.9"}`)
	done := make(chan struct{})
	var got reply
	var err error
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
		defer cancel()
		got, err = s.post(ctx, s.replicas[1], keyConsent, http.Header{"Toolpool-Session": {"deny-session"}}, "?timeout=2m", call)
	}()
	held := waitApproval(t, s, "deploy", "9.9.9", "pending")
	s.mustCLI(t, "approvals", "deny", str(held, "id"), "--as", "bob", "--reason", "not on a friday")
	select {
	case <-done:
	case <-time.After(2 * waitLong):
		t.Fatal("the denied call was not answered")
	}
	if err != nil {
		t.Fatalf("the denied call: %v", err)
	}
	want := classify.NotApprovedMessage("deploy", "not on a friday")
	if got.status != http.StatusOK || !got.results[0].IsError || got.results[0].text() != want {
		t.Errorf("the denied call: %d, is_error %v, %q; want 200, is_error, %q", got.status, got.results[0].IsError, got.results[0].text(), want)
	}
	if rec := waitApproval(t, s, "deploy", "9.9.9", "denied"); str(rec, "decided_by") != "bob" {
		t.Errorf("the denied record: decided_by %q; want bob", str(rec, "decided_by"))
	}
}

// testApprovalTimeout: a call matching the rule (input.target prod-*)
// waits its 2 s and is answered approval_timeout, while the call of the
// same turn that does not match runs at once; deciding it later is an
// error.
func testApprovalTimeout(t *testing.T, s *policyStack) {
	t.Helper()
	start := time.Now()
	got := s.mustPost(t, s.replicas[0], keyConsent, nil, http.StatusOK,
		use("release", `{"target":"prod-eu","tag":"t1"}`), use("release", `{"target":"dev-1","tag":"t2"}`))
	took := time.Since(start)
	prefix := "The call to release was not run: it needs a person's approval, and no one decided within "
	if res := got.results[0]; !res.IsError || !strings.HasPrefix(res.text(), prefix) {
		t.Errorf("the undecided call: is_error %v, %q; want %q…", res.IsError, res.text(), prefix)
	}
	if res := got.results[1]; res.IsError || !strings.HasPrefix(res.text(), "release run 1 for ") {
		t.Errorf("the call no rule holds for: is_error %v, %q; want it run", res.IsError, res.text())
	}
	if took < 2*time.Second {
		t.Errorf("the turn was answered after %v, before the approval's timeout (2s)", took)
	}
	if n := s.hook.count("release"); n != 1 {
		t.Errorf("release ran %d times; want once (the dev-1 call)", n)
	}
	rec := waitApproval(t, s, "release", "prod-eu", "timed_out")
	late := s.cli(t, "approvals", "approve", str(rec, "id"), "--as", "alice")
	if late.code == 0 || !strings.Contains(late.stderr, "timed out") {
		t.Errorf("approving after the timeout: exit %d, stderr %q; want an error saying it timed out", late.code, late.stderr)
	}
	if _, ok := findApproval(t, s, "release", "dev-1"); ok {
		t.Error("approvals ls lists the call no rule holds for")
	}
}

// findApproval is the record of `approvals ls --all --json` of tool
// whose input holds marker.
func findApproval(t *testing.T, s *policyStack, tool, marker string) (map[string]any, bool) {
	t.Helper()
	ls := s.mustCLI(t, "approvals", "ls", "--all", "--json")
	objs, err := jsonObjects(ls.stdout)
	if err != nil {
		t.Fatalf("approvals ls --all --json: %v\n%s", err, ls.stdout)
	}
	for _, o := range objs {
		if str(o, "tool") == tool && strings.HasPrefix(str(o, "id"), "ap-") && strings.Contains(str(o, "input"), marker) {
			return o, true
		}
	}
	return nil, false
}

// waitApproval waits until `approvals ls --all --json` lists the record of
// tool whose input holds marker in state, and returns it.
func waitApproval(t *testing.T, s *policyStack, tool, marker, state string) map[string]any {
	t.Helper()
	var rec map[string]any
	pollEvery(t, 100*time.Millisecond, fmt.Sprintf("a %s approval of %s %s", state, tool, marker), func() bool {
		o, ok := findApproval(t, s, tool, marker)
		rec = o
		return ok && str(o, "state") == state
	})
	return rec
}

// pollAsync GETs the async call at loc from r, long-polling, until it is
// done, and returns its answer.
func pollAsync(t *testing.T, s *policyStack, r *policyReplica, loc string) reply {
	t.Helper()
	var got reply
	pollEvery(t, 10*time.Millisecond, "the async call "+loc+" to be done", func() bool {
		req, _ := http.NewRequest(http.MethodGet, r.url(loc+"?wait=20s"), nil)
		var err error
		got, err = s.do(req, keyConsent)
		switch {
		case err != nil:
			return false
		case got.status == http.StatusAccepted:
			return false
		case got.status != http.StatusOK:
			t.Fatalf("GET %s: %d: %s", loc, got.status, got.body)
		}
		return true
	})
	return got
}

// TestPolicyBadCatalog: a catalog whose cost, cache or approval entry is
// wrong stops the worker at start, exit 2, with a message naming the file,
// the line, the tool and the field; and serve with in-process workers.
func TestPolicyBadCatalog(t *testing.T) {
	t.Parallel()
	head := "version: 1\ntools:\n  - name: search\n    description: d\n    input_schema: {type: object}\n" +
		"    backend: webhook\n    webhook: {url: \"http://127.0.0.1:9/search\"}\n"
	for _, tc := range []struct {
		name, entry string
		want        []string
	}{
		{"cache on a tool that is not idempotent", "    cache: {ttl: 10m}\n", []string{"cache", "idempotent: true", "read_only"}},
		{"cache without ttl", "    idempotent: true\n    cache: {scope: tenant}\n", []string{"cache.ttl"}},
		{"cache ttl over 7 days", "    idempotent: true\n    cache: {ttl: 200h}\n", []string{"cache.ttl"}},
		{"cache scope", "    idempotent: true\n    cache: {ttl: 1m, scope: world}\n", []string{"cache.scope", "world"}},
		{"negative cost", "    cost: -3\n", []string{"cost", "-3"}},
		{"approval glob", "    approval:\n      when:\n        input.path: \"/a/[b\"\n", []string{"approval.when", "/a/[b", "glob"}},
		{"approval field", "    approval:\n      when:\n        path: \"/etc/**\"\n", []string{"approval.when", "path"}},
		{"approval timeout", "    approval: {when: {input.path: \"/etc/**\"}, timeout: 200h}\n", []string{"approval.timeout"}},
		{"approval word", "    approval: sometimes\n", []string{"approval", "sometimes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cat := filepath.Join(dir, "tools.yaml")
			if err := os.WriteFile(cat, []byte(head+tc.entry), 0o600); err != nil {
				t.Fatal(err)
			}
			p := proctestRun(t, workerBin, "--nats-url", "nats://127.0.0.1:1", "--tools", cat, "--builtin-tools=none")
			if p.code != 2 {
				t.Fatalf("worker: exit %d; want 2\n%s", p.code, p.stderr)
			}
			if !regexp.MustCompile(`tools\.yaml:\d+: `).MatchString(p.stderr) || !strings.Contains(p.stderr, "search") {
				t.Errorf("worker: %q does not name the file, its line and the tool", p.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(p.stderr, w) {
					t.Errorf("worker: %q does not name %q", p.stderr, w)
				}
			}
		})
	}
	t.Run("serve", func(t *testing.T) {
		t.Parallel()
		cat := filepath.Join(t.TempDir(), "tools.yaml")
		if err := os.WriteFile(cat, []byte(head+"    cache: {ttl: 10m}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// serve reads the catalog once its embedded server runs, and stops
		// with exit 1 (the worker, which reads it first, exits 2); the
		// message is in its log line, quotes escaped.
		p := proctestRun(t, orchestratorBin, "serve", "--data-dir", filepath.Join(t.TempDir(), "data"),
			"--nats-listen", "127.0.0.1:0", "--tools", cat, "--http", "")
		if p.code == 0 || !regexp.MustCompile(`tools\.yaml:\d+: tool \\?"search\\?": cache: needs idempotent: true`).MatchString(p.stderr) {
			t.Errorf("serve with the catalog: exit %d, %q; want a failure naming the file, its line, the tool and cache", p.code, p.stderr)
		}
	})
}

// proctestRun runs bin with args to its end (a minute at most).
func proctestRun(t *testing.T, bin string, args ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s did not exit within %v\n%s", filepath.Base(bin), waitLong, stderr.String())
	case errors.As(err, &ee):
		return cliRun{code: ee.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	case err != nil:
		t.Fatalf("%s: %v", filepath.Base(bin), err)
	}
	return cliRun{stdout: stdout.String(), stderr: stderr.String()}
}

// pollEvery calls cond every interval until it holds, failing the test
// after waitLong.
func pollEvery(t *testing.T, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitLong, what)
		}
		time.Sleep(interval)
	}
}
