package console

import (
	"context"

	"github.com/toolpool/toolpool/internal/orchestrator/approval"
	"github.com/toolpool/toolpool/internal/orchestrator/budget"
)

// Approvals is the approval store as the console uses it (package
// approval's *Store, the one the orchestrator's gate holds calls in).
type Approvals interface {
	// List returns the pending approvals (deadline soonest first) and,
	// with all, the decided ones after them (newest first).
	List(ctx context.Context, all bool) ([]approval.Record, error)
	// Get returns one approval (approval.ErrNotFound when there is none).
	Get(ctx context.Context, id string) (approval.Record, error)
	// Decide approves or denies id, once: by is the operator, via
	// approval.ViaConsole.
	Decide(ctx context.Context, id string, approve bool, by, reason, via string) (approval.Record, error)
}

// Budgets lists the budgets with their spending (package budget's
// *Store).
type Budgets interface {
	List(ctx context.Context) ([]budget.Status, error)
}

// The stores satisfy the console's interfaces as they are.
var (
	_ Approvals = (*approval.Store)(nil)
	_ Budgets   = (*budget.Store)(nil)
)
