package policy

import (
	"context"
	"sync"
	"time"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// claimHoldDefault is how long a claim on a cache key lasts when the
// caller's ctx has no deadline: the longest a waiter waits for another's
// run before it runs the call itself.
const claimHoldDefault = 5 * time.Minute

// dispatch runs the calls at idx: a call of a caching tool that another
// caller, anywhere in the fleet, is already running waits for that run's
// result (coalescing); the others go to the dispatcher as one turn, and
// the successful results of caching tools are stored.
func (t *gateTurn) dispatch(idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	run, wait, dups := t.claim(idx)
	var wg sync.WaitGroup
	errs := make([]error, len(wait))
	for j, i := range wait {
		wg.Go(func() { errs[j] = t.awaitOther(i) })
	}
	err := t.runCalls(run)
	wg.Wait()
	for _, e := range errs {
		err = cmpErr(err, e)
	}
	for i, first := range dups { // the same call twice in the turn: one run
		if t.answered[first] || t.results[first].CallID != "" {
			r := t.results[first]
			r.CallID = t.calls[i].ID
			t.results[i], t.answered[i], t.outcome[i] = r, true, CacheCoalesced
			t.cacheEvent(i, CacheCoalesced)
			t.refund(i) // it did not run
		}
	}
	return err
}

// claim sorts the calls at idx: those to run here (every call of a tool
// that does not cache, or bypasses the cache, and the caching calls this
// caller claimed), those another caller runs, and the repeats within the
// turn of a caching call (index → the first one's index).
func (t *gateTurn) claim(idx []int) (run, wait []int, dups map[int]int) {
	cache := t.g.cfg.Cache
	first := map[string]int{}
	for _, i := range idx {
		key := t.cacheKey[i]
		if key == "" || cache == nil {
			run = append(run, i)
			continue
		}
		if f, ok := first[key]; ok {
			if dups == nil {
				dups = map[int]int{}
			}
			dups[i] = f
			continue
		}
		first[key] = i
		if t.outcome[i] == CacheBypass {
			run = append(run, i)
			continue
		}
		claimed, err := cache.Claim(t.ctx, key, t.hold())
		switch {
		case err != nil:
			t.g.log.Warn("policy: a cache claim failed; the call runs", "tool", t.calls[i].Tool, "err", err)
			run = append(run, i)
		case !claimed:
			wait = append(wait, i)
		case t.storedMeanwhile(i):
			cache.Release(context.WithoutCancel(t.ctx), key, nil)
		default:
			run = append(run, i)
		}
	}
	return run, wait, dups
}

// storedMeanwhile answers call i from the cache when a result was stored
// between its look-up and its claim (the run it would have waited for
// ended in between), and reports whether it did.
func (t *gateTurn) storedMeanwhile(i int) bool {
	res, hit, err := t.g.cfg.Cache.Get(t.ctx, t.cacheKey[i])
	if err != nil || !hit {
		return false
	}
	res.CallID = t.calls[i].ID
	t.results[i], t.answered[i], t.outcome[i] = res, true, CacheHit
	t.cacheEvent(i, CacheHit)
	t.refund(i)
	return true
}

// hold is how long a claim made now lasts: to the caller's deadline.
func (t *gateTurn) hold() time.Duration {
	if dl, ok := t.ctx.Deadline(); ok {
		return max(time.Until(dl), time.Second)
	}
	return claimHoldDefault
}

// runCalls dispatches the calls at idx as one turn, then stores the
// successful results of the caching ones and ends their claims.
func (t *gateTurn) runCalls(idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	blocks := make([]envelope.ToolUseBlock, len(idx))
	for j, i := range idx {
		blocks[j] = t.blocks[i]
	}
	ctx := t.ctx
	if sub := t.subSpans(idx); sub != nil {
		ctx = dispatch.WithCallSpans(ctx, sub) // the dispatcher's events on the gate's spans
	}
	got, err := t.g.cfg.Next.Dispatch(ctx, t.session, blocks)
	if err == nil && len(got) == len(idx) {
		for j, i := range idx {
			t.results[i] = withNote(got[j], nearly(t.spends[i]), t.calls[i].Tool)
		}
	}
	t.store(idx, err == nil && len(got) == len(idx))
	return err
}

// store puts the successful results of the caching calls at idx in the
// cache (ok: the calls have results) and releases their claims.
func (t *gateTurn) store(idx []int, ok bool) {
	cache := t.g.cfg.Cache
	if cache == nil {
		return
	}
	ctx := context.WithoutCancel(t.ctx)
	for _, i := range idx {
		key := t.cacheKey[i]
		if key == "" {
			continue
		}
		var failed *envelope.Result
		if r := &t.results[i]; ok && !r.IsError {
			if err := cache.Put(ctx, key, r, t.calls[i].Info.Cache.TTL); err != nil {
				t.g.log.Warn("policy: a result could not be cached", "tool", t.calls[i].Tool, "err", err)
			}
		} else if ok {
			failed = r // the waiters of this run get its failure, not a run each in turn
		}
		if t.outcome[i] != CacheBypass {
			cache.Release(ctx, key, failed)
		}
	}
}

// awaitOther waits for the run another caller claimed of call i; when the
// claim ends without a result, the call is claimed and run here.
func (t *gateTurn) awaitOther(i int) error {
	cache, key, c := t.g.cfg.Cache, t.cacheKey[i], &t.calls[i]
	start := time.Now()
	dispatch.SignalAdmitted(t.ctx) // a durable task's creator is answered while the call waits
	for {
		res, ok, err := cache.Await(t.ctx, key)
		switch {
		case ok:
			res.CallID = c.ID
			t.results[i], t.outcome[i] = res, CacheCoalesced
			t.cacheEvent(i, CacheCoalesced)
			t.refund(i) // it did not run: as a cache hit, it spends nothing
			return nil
		case t.ctx.Err() != nil:
			if e := t.ctxErr(); e != nil {
				return e
			}
			t.results[i] = noResult(c, time.Since(start))
			return nil
		case err != nil:
			t.g.log.Warn("policy: waiting for a cached result failed; the call runs", "tool", c.Tool, "err", err)
			return t.runCalls([]int{i})
		}
		claimed, err := cache.Claim(t.ctx, key, t.hold())
		switch {
		case err != nil:
			return t.runCalls([]int{i})
		case claimed && t.storedMeanwhile(i):
			cache.Release(context.WithoutCancel(t.ctx), key, nil)
			return nil
		case claimed:
			return t.runCalls([]int{i})
		}
	}
}

// noResult answers a call whose coalesced run gave no result by its
// deadline.
func noResult(c *Call, waited time.Duration) envelope.Result {
	r := gateResult(c, envelope.ClassTransient, classify.CodeDeadline, classify.NoResultMessage(c.Tool, waited))
	r.Retryable = true
	return r
}

func nearly(s Spend) []classify.Budget {
	if s == nil {
		return nil
	}
	return s.Nearly()
}

// refund gives back what call i spent of its budgets, if anything.
func (t *gateTurn) refund(i int) {
	if s := t.spends[i]; s != nil {
		s.Refund(context.WithoutCancel(t.ctx))
		t.spends[i] = nil
	}
}
