package policy

import "context"

// ReportFrom returns the report WithReport put in ctx, or nil: for what
// stands in for the gate in a front door's tests, and for a dispatcher
// wrapped around it.
func ReportFrom(ctx context.Context) *Report { return reportFrom(ctx) }

// NoCacheFrom reports whether ctx asks for fresh results (WithNoCache).
func NoCacheFrom(ctx context.Context) bool { return noCache(ctx) }

// ApprovalWaitFrom reports whether the gate waits for the decision on a
// call held for approval: true unless ctx says WithoutApprovalWait.
func ApprovalWaitFrom(ctx context.Context) bool { return !approvalNoWait(ctx) }
