package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Dispatcher runs a turn's calls: the dispatcher (dispatch.Dispatcher), or
// anything with its Dispatch.
type Dispatcher interface {
	Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error)
}

// Metrics receives what the cache did for each call of a caching tool
// (the budgets and approvals count their own refusals and decisions). A
// nil Metrics in Config counts nothing.
type Metrics interface {
	CacheOutcome(tool string, o CacheOutcome)
}

// Config configures a Gate. Next and Catalog are required; a nil Budgets,
// Cache or Approvals turns that part off.
type Config struct {
	Next      Dispatcher
	Catalog   pooltype.Catalog
	Budgets   Budgets
	Cache     Cache
	Approvals Approvals
	Metrics   Metrics
	Logger    *slog.Logger // nil: slog.Default()
	// Tracer, when on, gives the calls of the turns the gate applies to
	// their spans from admission on, with the gate's events (trace.go).
	// nil: off.
	Tracer *tracing.Tracer
}

// Gate applies the result cache, approval gates and budgets to a turn's
// calls before the dispatcher sees them (package doc).
type Gate struct {
	cfg Config
	log *slog.Logger
}

// New returns a Gate over cfg.Next.
func New(cfg Config) (*Gate, error) {
	if cfg.Next == nil || cfg.Catalog == nil {
		return nil, errors.New("policy: Config.Next and Config.Catalog are required")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	return &Gate{cfg: cfg, log: cmpLogger(cfg.Logger)}, nil
}

func cmpLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

type noMetrics struct{}

func (noMetrics) CacheOutcome(string, CacheOutcome) {}
func (noMetrics) Refused(string, string)            {}

// Dispatch runs calls as the dispatcher does (dispatch.Dispatcher.Dispatch),
// after the cache, the approval gates and the budgets had their say: see
// the package doc. Its errors are the dispatcher's, the caller's ctx's,
// and *ExhaustedError when every call was refused by a spent budget.
func (g *Gate) Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	if !g.applies(ctx, calls) {
		return g.cfg.Next.Dispatch(ctx, session, calls)
	}
	t := g.newTurn(ctx, session, calls)
	return t.run()
}

// applies reports whether anything of the gate may concern calls: a
// budget of the caller, or a tool that caches or needs approval. It makes
// no round trip and no allocation: the common turn goes straight on.
func (g *Gate) applies(ctx context.Context, calls []envelope.ToolUseBlock) bool {
	if g.cfg.Budgets != nil && g.cfg.Budgets.Active(dispatch.TenantFrom(ctx), KeyNameFrom(ctx)) {
		return true
	}
	if g.cfg.Cache == nil && g.cfg.Approvals == nil {
		return false
	}
	for i := range calls {
		info, ok := g.cfg.Catalog.Lookup(ctx, calls[i].Name)
		if ok && ((info.Cache != nil && g.cfg.Cache != nil) || (info.Approval != nil && g.cfg.Approvals != nil)) {
			return true
		}
	}
	return false
}

// Results the gate writes itself.

func gateResult(c *Call, class envelope.Class, code, text string) envelope.Result {
	return envelope.Result{V: envelope.Version, CallID: c.ID, Tool: c.Tool, Content: envelope.Text(text), IsError: true, Class: class, Code: code}
}

func exhaustedResult(c *Call, b classify.Budget) envelope.Result {
	b.Tool = c.Tool
	r := gateResult(c, envelope.ClassTransient, classify.CodeBudgetExhausted, classify.BudgetExhaustedMessage(b))
	r.Retryable, r.RetryAfter = true, b.ResetIn
	return r
}

func decisionResult(c *Call, d Decision) envelope.Result {
	switch d.State {
	case Denied:
		return gateResult(c, envelope.ClassPermanent, classify.CodeNotApproved, classify.NotApprovedMessage(c.Tool, d.Reason))
	case TimedOut:
		return gateResult(c, envelope.ClassPermanent, classify.CodeApprovalTimeout, classify.ApprovalTimedOutMessage(c.Tool, d.Waited))
	}
	r := gateResult(c, envelope.ClassTransient, classify.CodeApprovalPending, classify.ApprovalPendingMessage(c.Tool, d.Waited))
	r.Retryable = true
	return r
}

func unavailableResult(c *Call) envelope.Result {
	r := gateResult(c, envelope.ClassTransient, classify.CodeUnavailable, classify.PoolUnavailableMessage(c.Tool))
	r.Retryable = true
	return r
}

// withNote adds the budget's sentence to a result's content.
func withNote(r envelope.Result, notes []classify.Budget, tool string) envelope.Result {
	if len(notes) == 0 {
		return r
	}
	content := make(envelope.Content, len(r.Content), len(r.Content)+len(notes))
	copy(content, r.Content)
	for _, b := range notes {
		b.Tool = tool
		content = append(content, envelope.Block{Type: "text", Text: classify.BudgetNearlySpentMessage(b)})
	}
	r.Content = content
	return r
}

// ctxError is Dispatch's error for a ctx that ended otherwise than by its
// deadline.
func ctxError(ctx context.Context) error {
	return fmt.Errorf("dispatch: %w", ctx.Err())
}

// detach returns a ctx for calls whose runs others may be waiting for
// (a cacheable call, coalesced fleet-wide): when ctx is cancelled, it is
// cancelled with dispatch.ErrDetached, which leaves the calls in the pool,
// rather than cancelling them for everyone. Its deadline is ctx's.
func detach(ctx context.Context) (context.Context, func()) {
	dctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) { // a deadline is dctx's own
			cancel(dispatch.ErrDetached)
		}
	})
	if dl, ok := ctx.Deadline(); ok {
		var cancelDL context.CancelFunc
		dctx, cancelDL = context.WithDeadline(dctx, dl)
		return dctx, func() { stop(); cancelDL(); cancel(nil) }
	}
	return dctx, func() { stop(); cancel(nil) }
}
