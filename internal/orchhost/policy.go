package orchhost

import (
	"context"
	"errors"

	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
	"github.com/toolpool/toolpool/internal/orchestrator/budget"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/orchestrator/rescache"
)

// policyParts are the stores behind the policy gate: budgets, approvals
// and the result cache, each on its JetStream bucket or stream.
type policyParts struct {
	budgets   *budget.Store
	approvals *approval.Store
	cache     *rescache.Store
	cacheM    *metrics.Cache
}

// newGate makes the stores and puts the policy gate in front of the
// dispatcher: every front door, and the durable tasks, dispatch through
// it.
func (h *Host) newGate(catalog dispatch.Catalog) (err error) {
	reg, log := h.cfg.Metrics, h.cfg.Logger
	bm, err := metrics.NewBudget(reg)
	if err != nil {
		return err
	}
	if h.pol.budgets, err = budget.New(budget.Config{JS: h.js, Logger: log, Metrics: bm, Replicas: h.cfg.Replicas}); err != nil {
		return err
	}
	am, err := metrics.NewApprovals(reg)
	if err != nil {
		return err
	}
	if h.pol.approvals, err = approval.New(approval.Config{JS: h.js, Logger: log, Metrics: am, Replicas: h.cfg.Replicas}); err != nil {
		return err
	}
	if h.pol.cacheM, err = metrics.NewCache(reg, metrics.CacheOptions{}); err != nil {
		return err
	}
	if h.pol.cache, err = rescache.New(rescache.Config{JS: h.js, Logger: log, Metrics: h.pol.cacheM, Replicas: h.cfg.Replicas}); err != nil {
		return err
	}
	h.gate, err = policy.New(policy.Config{
		Next: h.d, Catalog: catalog, Logger: log,
		Budgets: h.pol.budgets, Approvals: h.pol.approvals,
		Cache: h.pol.cache, Metrics: rescache.GateMetrics(h.pol.cacheM),
		Tracer: h.cfg.Tracer,
	})
	return err
}

// startPolicy opens the gate's stores (creating their buckets and streams
// when no orchestrator did yet).
func (h *Host) startPolicy(ctx context.Context) error {
	if err := h.pol.budgets.Start(ctx); err != nil {
		return err
	}
	if err := h.pol.cache.Start(ctx); err != nil {
		// The cache saves runs; without it every call runs. A server
		// short of storage for its bucket, or an older permissions file,
		// must not keep the orchestrator from serving.
		if ctx.Err() != nil {
			return err
		}
		h.cfg.Logger.Warn("no result cache: calls of caching tools run every time", "err", err)
	}
	return h.pol.approvals.Start(ctx)
}

// stopPolicy stops the gate's stores.
func (h *Host) stopPolicy(ctx context.Context) error {
	return errors.Join(h.pol.approvals.Stop(ctx), h.pol.cache.Stop(ctx), h.pol.budgets.Stop(ctx))
}

// Approvals is the store of calls held for approval (the console's page,
// the MCP front door).
func (h *Host) Approvals() *approval.Store { return h.pol.approvals }

// CacheMetrics are the result cache's counts (the console's overview).
func (h *Host) CacheMetrics() *metrics.Cache { return h.pol.cacheM }

// Budgets is the budgets' store.
func (h *Host) Budgets() *budget.Store { return h.pol.budgets }
