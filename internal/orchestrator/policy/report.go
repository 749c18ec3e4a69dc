package policy

import "context"

// CacheOutcome is what the cache did for one call, told to operators
// (a response header, MCP _meta, metrics), never to the model.
type CacheOutcome uint8

// The outcomes of CacheOutcome.
const (
	CacheNone      CacheOutcome = iota // the tool does not cache
	CacheHit                           // answered from the cache
	CacheMiss                          // run (or awaited), then stored
	CacheBypass                        // the caller asked for a fresh run
	CacheCoalesced                     // waited for an identical call in flight
)

// String is the outcome's name: "", "hit", "miss", "bypass", "coalesced".
func (o CacheOutcome) String() string {
	switch o {
	case CacheHit:
		return "hit"
	case CacheMiss:
		return "miss"
	case CacheBypass:
		return "bypass"
	case CacheCoalesced:
		return "coalesced"
	}
	return ""
}

// Report is what the gate tells a front door about a turn's calls, for
// operators: the front door makes one, passes it with WithReport and reads
// it after Dispatch.
type Report struct {
	// Cache is the cache's outcome per call, in the calls' order; nil when
	// no call's tool caches.
	Cache []CacheOutcome
	// Approvals is the approval id per call, in the calls' order ("" for a
	// call that needs none); nil when no call needs approval. A front door
	// that asked WithoutApprovalWait decides these on its host's answer.
	Approvals []string
}

type reportKey struct{}

// WithReport returns ctx asking the gate to fill r.
func WithReport(ctx context.Context, r *Report) context.Context {
	return context.WithValue(ctx, reportKey{}, r)
}

func reportFrom(ctx context.Context) *Report {
	r, _ := ctx.Value(reportKey{}).(*Report)
	return r
}

type noCacheKey struct{}

// WithNoCache returns ctx asking the gate not to answer its calls from the
// cache (HTTP Cache-Control: no-cache, MCP _meta): they run, and their
// results replace the stored ones.
func WithNoCache(ctx context.Context) context.Context {
	return context.WithValue(ctx, noCacheKey{}, true)
}

func noCache(ctx context.Context) bool {
	b, _ := ctx.Value(noCacheKey{}).(bool)
	return b
}

type keyNameKey struct{}

// WithKeyName returns ctx carrying the name of the API key the calls come
// with, for budgets set on one key.
func WithKeyName(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, keyNameKey{}, name)
}

// KeyNameFrom returns the key name WithKeyName put in ctx, or "".
func KeyNameFrom(ctx context.Context) string {
	s, _ := ctx.Value(keyNameKey{}).(string)
	return s
}

type askHostKey struct{}

// WithoutApprovalWait returns ctx asking the gate not to wait for a
// decision on a call that needs approval: the call is recorded as waiting
// and answered at once with classify.CodeApprovalPending, so that the
// front door can ask its host for the decision instead (MCP 2026-07-28's
// input_required) and send the call again with it.
func WithoutApprovalWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, askHostKey{}, true)
}

func approvalNoWait(ctx context.Context) bool {
	b, _ := ctx.Value(askHostKey{}).(bool)
	return b
}
