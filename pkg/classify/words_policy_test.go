package classify

import (
	"strings"
	"testing"
	"time"
)

// The sentences of budgets and approvals, as the model reads them.
func TestPolicyWords(t *testing.T) {
	t.Parallel()
	daily := Budget{Name: "acme-daily", Tool: "search", Limit: 100, Spent: 100, Period: "per day", ResetIn: 5*time.Hour + 30*time.Minute}
	rolling := Budget{Name: "llm-spend", Tool: "summarize", Limit: 250, Spent: 248, Cost: true, Period: "per rolling 90m", ResetIn: 90 * time.Second}
	one := Budget{Name: "tiny", Tool: "echo", Limit: 1, Spent: 1, Period: "per minute", ResetIn: 20 * time.Second}
	oneCost := Budget{Name: "tiny-cost", Tool: "echo", Limit: 1, Spent: 1, Cost: true, Period: "per hour", ResetIn: time.Hour}
	over := Budget{Name: "over", Tool: "search", Limit: 10, Spent: 12, Period: "per month", ResetIn: 48 * time.Hour}
	tests := []struct {
		name, got, want string
	}{
		{"budget exhausted, calls", BudgetExhaustedMessage(daily),
			`The call to search was not run: the budget "acme-daily" allows 100 calls per day and 100 calls are spent. It has room again in 5h30m. ` +
				`Do not call search again before then: finish the task with what you already have, or tell the user that the budget is spent.`},
		{"budget exhausted, cost units", BudgetExhaustedMessage(rolling),
			`The call to summarize was not run: the budget "llm-spend" allows 250 cost units per rolling 90m and 248 cost units are spent. It has room again in 1m30s. ` +
				`Do not call summarize again before then: finish the task with what you already have, or tell the user that the budget is spent.`},
		{"budget exhausted, one call", BudgetExhaustedMessage(one),
			`The call to echo was not run: the budget "tiny" allows 1 call per minute and 1 call is spent. It has room again in 20s. ` +
				`Do not call echo again before then: finish the task with what you already have, or tell the user that the budget is spent.`},
		{"budget exhausted, one cost unit", BudgetExhaustedMessage(oneCost),
			`The call to echo was not run: the budget "tiny-cost" allows 1 cost unit per hour and 1 cost unit is spent. It has room again in 1h. ` +
				`Do not call echo again before then: finish the task with what you already have, or tell the user that the budget is spent.`},
		{"nearly spent, calls", BudgetNearlySpentMessage(Budget{Name: "acme-daily", Tool: "search", Limit: 100, Spent: 85, Period: "per day", ResetIn: 3 * time.Hour}),
			`Note: the budget "acme-daily" has 15 calls left of the 100 calls it allows per day (it has room again in 3h); plan the remaining calls to search accordingly.`},
		{"nearly spent, cost units", BudgetNearlySpentMessage(rolling),
			`Note: the budget "llm-spend" has 2 cost units left of the 250 cost units it allows per rolling 90m (it has room again in 1m30s); plan the remaining calls to summarize accordingly.`},
		{"nearly spent, overspent shows none left", BudgetNearlySpentMessage(over),
			`Note: the budget "over" has 0 calls left of the 10 calls it allows per month (it has room again in 48h); plan the remaining calls to search accordingly.`},
		{"not approved, with a reason", NotApprovedMessage("write_file", "not on a Friday"),
			`The call to write_file was not run: it needs a person's approval, and they did not approve it (their reason: "not on a Friday"). ` +
				`Do not send the same call again; ask the user how to proceed, or use a different approach.`},
		{"not approved, without a reason", NotApprovedMessage("write_file", ""),
			`The call to write_file was not run: it needs a person's approval, and they did not approve it. ` +
				`Do not send the same call again; ask the user how to proceed, or use a different approach.`},
		{"not approved, a reason quoted as it is", NotApprovedMessage("run", "say \"no\"\nthen stop"),
			`The call to run was not run: it needs a person's approval, and they did not approve it (their reason: "say \"no\"\nthen stop"). ` +
				`Do not send the same call again; ask the user how to proceed, or use a different approach.`},
		{"approval timed out", ApprovalTimedOutMessage("deploy", 15*time.Minute),
			`The call to deploy was not run: it needs a person's approval, and no one decided within 15m. Ask the user to approve it, then send the call again; or use a different approach.`},
		{"approval timed out, days", ApprovalTimedOutMessage("deploy", 7*24*time.Hour),
			`The call to deploy was not run: it needs a person's approval, and no one decided within 168h. Ask the user to approve it, then send the call again; or use a different approach.`},
		{"approval pending", ApprovalPendingMessage("deploy", 30*time.Second),
			`The call to deploy has not run yet: it needs a person's approval, and none came in the 30s this request waited. ` +
				`The request for approval stays open: send the same call again later, with the same id and the same arguments, to get its outcome. ` +
				`Do not change the arguments, or it needs a new approval.`},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, tc.got, tc.want)
		}
		if strings.Contains(tc.got, "  ") || strings.HasSuffix(tc.got, " ") {
			t.Errorf("%s: stray space in %q", tc.name, tc.got)
		}
	}
}

// The codes are distinct from each other and from the taxonomy's.
func TestPolicyCodes(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, c := range []string{CodeBudgetExhausted, CodeNotApproved, CodeApprovalTimeout, CodeApprovalPending} {
		if c == "" || seen[c] || strings.ToLower(c) != c || strings.ContainsAny(c, " .-") {
			t.Errorf("code %q: empty, repeated, or not lower_snake_case", c)
		}
		seen[c] = true
	}
}
