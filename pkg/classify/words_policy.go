package classify

import (
	"strconv"
	"time"
)

// Codes of the is_error results the orchestrator writes for calls that a
// budget or an approval gate kept from running (docs/operations.md,
// "Budgets" and "Approvals"). None of these calls was published.
const (
	// CodeBudgetExhausted: a budget that applies to the call is spent
	// until its reset (Retryable, RetryAfter = the time to the reset).
	CodeBudgetExhausted = "budget_exhausted"
	// CodeNotApproved: a person denied the call.
	CodeNotApproved = "not_approved"
	// CodeApprovalTimeout: no decision came within the tool's approval
	// timeout.
	CodeApprovalTimeout = "approval_timeout"
	// CodeApprovalPending: the call still waits for a decision when its
	// request's deadline came; the same call sent again is answered with
	// the decision once there is one.
	CodeApprovalPending = "approval_pending"
)

// Budget describes a budget as the model is told of it: the input of
// BudgetExhaustedMessage and BudgetNearlySpentMessage.
type Budget struct {
	Name  string // the budget's name, as operators set it
	Tool  string // the tool called
	Limit int64  // what the budget allows per period
	Spent int64  // what is spent of it in the current period
	// Cost says the budget counts cost units (a tool's catalog cost:),
	// not calls.
	Cost bool
	// Period is the budget's period as words: "per day", "per hour",
	// "per rolling 24h".
	Period string
	// ResetIn is how long until the budget has room again: the end of the
	// period, or for a rolling window when the oldest spending leaves it.
	ResetIn time.Duration
}

// units is "100 calls", "1 call", "250 cost units", "1 cost unit".
func (b Budget) units(n int64) string {
	s := strconv.FormatInt(n, 10)
	switch {
	case b.Cost && n == 1:
		return s + " cost unit"
	case b.Cost:
		return s + " cost units"
	case n == 1:
		return s + " call"
	}
	return s + " calls"
}

// BudgetExhaustedMessage is the content of the is_error result
// (CodeBudgetExhausted) of a call a spent budget kept from running.
func BudgetExhaustedMessage(b Budget) string {
	are := " are spent"
	if b.Spent == 1 {
		are = " is spent"
	}
	return "The call to " + b.Tool + " was not run: the budget \"" + b.Name + "\" allows " + b.units(b.Limit) + " " + b.Period +
		" and " + b.units(b.Spent) + are + ". It has room again in " + FormatDuration(b.ResetIn) +
		". Do not call " + b.Tool + " again before then: finish the task with what you already have, or tell the user that the budget is spent."
}

// BudgetNearlySpentMessage is the sentence added to a call's result when a
// budget that applies to it has passed its soft threshold, so an agent can
// plan the calls it has left.
func BudgetNearlySpentMessage(b Budget) string {
	left := max(b.Limit-b.Spent, 0)
	return "Note: the budget \"" + b.Name + "\" has " + b.units(left) + " left of the " + b.units(b.Limit) + " it allows " + b.Period +
		" (it has room again in " + FormatDuration(b.ResetIn) + "); plan the remaining calls to " + b.Tool + " accordingly."
}

// NotApprovedMessage is the content of the is_error result
// (CodeNotApproved) of a call a person denied; reason is theirs ("" when
// they gave none).
func NotApprovedMessage(tool, reason string) string {
	s := "The call to " + tool + " was not run: it needs a person's approval, and they did not approve it"
	if reason != "" {
		s += " (their reason: " + strconv.Quote(reason) + ")"
	}
	return s + ". Do not send the same call again; ask the user how to proceed, or use a different approach."
}

// ApprovalTimedOutMessage is the content of the is_error result
// (CodeApprovalTimeout) of a call no one decided on within the tool's
// approval timeout.
func ApprovalTimedOutMessage(tool string, waited time.Duration) string {
	return "The call to " + tool + " was not run: it needs a person's approval, and no one decided within " + FormatDuration(waited) +
		". Ask the user to approve it, then send the call again; or use a different approach."
}

// ApprovalPendingMessage is the content of the is_error result
// (CodeApprovalPending) of a call that still waits for a person's approval
// when its request's deadline comes: the approval stays open, and the same
// call (same id and arguments) sent again gets the decision.
func ApprovalPendingMessage(tool string, waited time.Duration) string {
	return "The call to " + tool + " has not run yet: it needs a person's approval, and none came in the " + FormatDuration(waited) +
		" this request waited. The request for approval stays open: send the same call again later, with the same id and the same arguments, to get its outcome. Do not change the arguments, or it needs a new approval."
}
