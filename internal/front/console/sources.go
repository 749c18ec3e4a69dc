package console

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
)

// This file is the console's seam to the stores of issue 24, which are
// built beside it: the approval store (package approval), the budgets
// (package budget). Until they are merged the console codes against their
// published API through these interfaces and the mirror types below; once
// merged, the mirror types give way to approval.Record and budget.Status
// and the stores satisfy the interfaces as they are.

// Approvals is the approval store as the console uses it (package
// approval's *Store): the approvals, pending first, and a decision.
type Approvals interface {
	// List returns the pending approvals (deadline soonest first) and,
	// with all, the decided ones after them (newest first).
	List(ctx context.Context, all bool) ([]ApprovalRecord, error)
	// Get returns one approval; an unknown id is ErrApprovalNotFound.
	Get(ctx context.Context, id string) (ApprovalRecord, error)
	// Decide approves or denies id, once: by is the operator, via
	// ApprovalViaConsole.
	Decide(ctx context.Context, id string, approve bool, by, reason, via string) (ApprovalRecord, error)
}

// ApprovalRecord is one held call and its decision (approval.Record).
type ApprovalRecord struct {
	ID        string
	Tool      string
	Input     json.RawMessage
	Tenant    string
	Session   string
	CallID    string
	KeyName   string
	Binding   string
	CreatedAt time.Time
	Timeout   time.Duration
	State     ApprovalState
	DecidedBy string
	DecidedAt time.Time
	Reason    string
	Via       string
}

// Deadline is when the approval times out.
func (r *ApprovalRecord) Deadline() time.Time { return r.CreatedAt.Add(r.Timeout) }

// ApprovalState is an approval's state (approval.State).
type ApprovalState string

// The states of an approval, and the console's Via.
const (
	ApprovalPending    ApprovalState = "pending"
	ApprovalApproved   ApprovalState = "approved"
	ApprovalDenied     ApprovalState = "denied"
	ApprovalTimedOut   ApprovalState = "timed_out"
	ApprovalViaConsole               = "console"
)

// The errors of Approvals (approval.ErrNotFound, ErrAlreadyDecided,
// ErrTimedOut, ErrInvalid), matched with errors.Is.
var (
	ErrApprovalNotFound = errors.New("approval: not found")
	ErrAlreadyDecided   = errors.New("approval: already decided")
	ErrApprovalTimedOut = errors.New("approval: timed out")
	ErrApprovalInvalid  = errors.New("approval: invalid")
)

// validApprovalID reports whether id is an approval's id ("ap-" and 20
// lower-case hex characters; approval.ValidID).
func validApprovalID(id string) bool {
	rest, ok := strings.CutPrefix(id, "ap-")
	if !ok || len(rest) != 20 {
		return false
	}
	for _, c := range rest {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Budgets lists the budgets with their spending (package budget's
// *Store).
type Budgets interface {
	List(ctx context.Context) ([]BudgetStatus, error)
}

// BudgetStatus is one budget with its spending now (budget.Status).
type BudgetStatus struct {
	Name    string
	Tenant  string
	Key     string
	Tools   []string
	Period  string
	Window  time.Duration
	Limit   int64
	Cost    bool
	Soft    float64
	Spent   int64
	Left    int64
	ResetIn time.Duration
}

// Who is the budget's tenant or key, in words.
func (s BudgetStatus) Who() string {
	if s.Key != "" {
		return "key " + s.Key
	}
	return "tenant " + s.Tenant
}

// PeriodWords is the budget's period in words: "per day", "per rolling 90m".
func (s BudgetStatus) PeriodWords() string {
	if s.Window > 0 {
		return "per rolling " + classify.FormatDuration(s.Window)
	}
	return "per " + s.Period
}
