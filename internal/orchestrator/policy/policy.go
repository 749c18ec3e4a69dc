package policy

import (
	"context"
	"encoding/json"
	"time"

	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Call is one call of a turn as the gate's steps see it.
type Call struct {
	Tenant  string // the caller's tenant ("" without API keys)
	Key     string // the caller's API key's name ("" for none, or a key without a name)
	Session string
	ID      string // the tool_use id
	Tool    string
	Input   json.RawMessage // as the caller sent it
	// Info is what the catalog says of the tool: its cost, cache policy,
	// approval rule and version.
	Info pooltype.ToolInfo
}

// Budgets spends calls' costs from the budgets that apply to them,
// fleet-wide (package budget).
type Budgets interface {
	// Active reports whether any budget may apply to a call of the tenant
	// or key: when none does, the gate calls nothing else and the call
	// costs no round trip.
	Active(tenant, key string) bool
	// Charge spends c's cost (Info.Cost, 0 meaning 1) from every budget
	// that applies to c, fleet-wide, or from none: when one of them has
	// no room, it spends nothing and returns an error matching
	// *Exhausted. The Spend it returns on success gives the budgets past
	// their soft threshold.
	Charge(ctx context.Context, c *Call) (Spend, error)
}

// Spend is what a successful Charge spent.
type Spend interface {
	// Refund gives the spending back: the call was not run after all (its
	// turn failed as a whole).
	Refund(ctx context.Context)
	// Nearly lists the budgets past their soft threshold after this
	// spending, for the sentence added to the call's result.
	Nearly() []classify.Budget
}

// Exhausted is the error of a Charge refused by a spent budget.
type Exhausted struct {
	Budget classify.Budget // the budget, for the model's words
}

// Error is the model's words without the tool.
func (e *Exhausted) Error() string {
	return "budget " + e.Budget.Name + " is spent"
}

// Cache is the shared result cache (package rescache).
type Cache interface {
	// Key is the cache key of c (its tool, Info.Version, canonical input,
	// and its tenant unless the scope is global); ok is false when c's
	// input is not a JSON object (the dispatcher answers it).
	Key(c *Call) (key string, ok bool)
	// Get returns the result stored under key, if one is there and not
	// expired.
	Get(ctx context.Context, key string) (envelope.Result, bool, error)
	// Put stores a successful result under key for ttl.
	Put(ctx context.Context, key string, res *envelope.Result, ttl time.Duration) error
	// Claim records, fleet-wide, that the caller runs key's call now, for
	// at most hold: claimed is false when another caller (on any replica)
	// already does, and the caller then Awaits its result instead of
	// running the call again (in-flight coalescing).
	Claim(ctx context.Context, key string, hold time.Duration) (claimed bool, err error)
	// Release ends the caller's claim on key: after Put (the waiters take
	// the stored result), with the run's is_error result in failed (the
	// waiters of this run get it too; nothing is cached), or with neither
	// (the run gave no result: a waiter claims and runs the call).
	Release(ctx context.Context, key string, failed *envelope.Result)
	// Await waits for key's result while another caller's claim on it
	// lasts: the stored result, or the is_error result its run released
	// the claim with (ok, both); ok is false when the claim ended
	// (released, or its hold passed) without a result, and err is ctx's
	// when it ended first.
	Await(ctx context.Context, key string) (res envelope.Result, ok bool, err error)
}

// Approvals holds calls until a person decides (package approval).
type Approvals interface {
	// Required reports whether c needs approval: its tool's rule holds for
	// its input.
	Required(c *Call) bool
	// Hold records c as waiting for approval, unless it already is (the
	// same call sent again: its id derives from the call's tenant, session,
	// id, tool and input), and returns its decision so far: Pending, or the
	// decision made meanwhile, or TimedOut once the tool's approval
	// timeout has passed since c was held. An approval spent by a run of
	// c (Use) whose result is no longer kept is held again: Pending.
	Hold(ctx context.Context, c *Call) (Decision, error)
	// Wait waits for the decision on the approval id (Decision.ID) until
	// there is one, its timeout passes (TimedOut) or ctx ends (Pending,
	// and ctx's error).
	Wait(ctx context.Context, id string) (Decision, error)
	// Use records, before the gate lets the approved call c through to
	// the dispatcher, that the approval id is used, and says whether c
	// may go on: an approval is for one run. Approved the first time, and
	// while that run's result is kept (c sent again: the dispatcher
	// answers it from the result, or joins the run); once the result is
	// no longer kept, the approval is spent and c is held again
	// (Pending). On an error c must not run.
	Use(ctx context.Context, c *Call, id string) (Decision, error)
}

// Decision is what became of a call held for approval.
type Decision struct {
	// ID is the approval's id, as operators see it.
	ID string
	// State is the outcome.
	State DecisionState
	// By and Reason are who decided, and why ("" when they said nothing).
	By, Reason string
	// Waited is how long the call has waited, over every request that
	// sent it.
	Waited time.Duration
}

// DecisionState is the outcome of a held call.
type DecisionState uint8

// The states of Decision.
const (
	// Pending: no decision yet.
	Pending DecisionState = iota
	// Approved: the call may run, once (Approvals.Use).
	Approved
	// Denied: a person refused it.
	Denied
	// TimedOut: no decision within the tool's timeout.
	TimedOut
)

// ExhaustedError is Gate.Dispatch's error when every call of a turn was
// refused by a spent budget: the HTTP API answers it with 429 and a
// Retry-After.
type ExhaustedError struct {
	// RetryAfter is when the first of the refusing budgets has room again.
	RetryAfter time.Duration
	// Results are the calls' is_error results (classify.CodeBudgetExhausted),
	// in the calls' order.
	Results []envelope.Result
}

// Error says the turn was over budget.
func (e *ExhaustedError) Error() string {
	return "policy: every call is over budget; room again in " + classify.FormatDuration(e.RetryAfter)
}
