package orchhost_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
	"github.com/toolpool/toolpool/internal/orchestrator/budget"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// policyPool is one NATS server, one worker host serving counting tools
// and two orchestrator hosts ("replicas") on connections of their own.
type policyPool struct {
	a, b *pooltest.Orchestrator
	ran  map[string]*atomic.Int64
	// gate, when set, holds every run of slow until it is closed.
	gate chan struct{}
	// cat is the replicas' catalog, for another replica.
	cat dispatch.Catalog
}

func startPolicyPool(t *testing.T) (*policyPool, *pooltest.Pool) {
	t.Helper()
	p := &policyPool{ran: map[string]*atomic.Int64{}, gate: make(chan struct{})}
	reg := tools.NewRegistry()
	obj := json.RawMessage(`{"type":"object"}`)
	add := func(tl tools.Tool) {
		n := &atomic.Int64{}
		p.ran[tl.Name] = n
		tl.Description, tl.InputSchema = "a test tool", obj
		tl.Handler = func(ctx context.Context, input json.RawMessage) (tools.Output, error) {
			n.Add(1)
			if tl.Name == "slow" {
				select {
				case <-p.gate:
				case <-ctx.Done():
					return tools.Output{}, ctx.Err()
				}
			}
			return tools.Text(fmt.Sprintf("%s ran with %s", tl.Name, input)), nil
		}
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	add(tools.Tool{Name: "plain", Concurrency: 256})
	add(tools.Tool{Name: "search", Idempotent: true, Cache: &tools.CachePolicy{TTL: time.Minute}})
	add(tools.Tool{Name: "slow", Idempotent: true, Cache: &tools.CachePolicy{TTL: time.Minute}})
	add(tools.Tool{Name: "deploy", Approval: &tools.ApprovalRule{}})
	pool := pooltest.Start(t)
	pooltest.StartServer(t, pool.Srv.ClientURL(), reg)
	cat := discovery.RegistryCatalog(reg)
	p.cat = cat
	p.a = pooltest.StartOrchestrator(t, natstest.Connect(t, pool.Srv.ClientURL()), cat)
	p.b = pooltest.StartOrchestrator(t, natstest.Connect(t, pool.Srv.ClientURL()), cat)
	return p, pool
}

func call(id, tool, input string) []envelope.ToolUseBlock {
	return []envelope.ToolUseBlock{{Type: "tool_use", ID: id, Name: tool, Input: json.RawMessage(input)}}
}

func TestBudgetSharedByTwoReplicas(t *testing.T) {
	p, pool := startPolicyPool(t)
	ctx := dispatch.WithTenant(t.Context(), "acme")
	if err := budget.Set(ctx, pool.JS, budget.Def{Name: "acme-daily", Tenant: "acme", Tools: []string{"plain"}, Period: "day", Limit: 100}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []*pooltest.Orchestrator{p.a, p.b} {
		natstest.Eventually(t, 10*time.Second, "the replicas see the budget", func() bool { return o.Budgets().Active("acme", "") })
	}
	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	for i := range 160 {
		o := p.a
		if i%2 == 1 {
			o = p.b
		}
		wg.Go(func() {
			got, err := o.Dispatch(ctx, "s", call(fmt.Sprintf("c%d", i), "plain", fmt.Sprintf(`{"i":%d}`, i)))
			if _, over := errors.AsType[*policy.ExhaustedError](err); over {
				refused.Add(1)
				return
			}
			switch {
			case err != nil:
				t.Error(err)
			case got[0].IsError:
				t.Errorf("call %d: %s", i, got[0].Content.Text())
			default:
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 100 || refused.Load() != 60 || p.ran["plain"].Load() != 100 {
		t.Fatalf("admitted %d, refused %d, ran %d; want exactly 100, 60, 100", ok.Load(), refused.Load(), p.ran["plain"].Load())
	}
	// Another tenant and another tool are not counted.
	if got, err := p.a.Dispatch(dispatch.WithTenant(t.Context(), "other"), "s", call("o", "plain", `{}`)); err != nil || got[0].IsError {
		t.Fatalf("another tenant: %v %+v", err, got)
	}
	if err := budget.Reset(ctx, pool.JS, "acme-daily", time.Now()); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, "a reset gives room again", func() bool {
		got, err := p.b.Dispatch(ctx, "s", call(fmt.Sprintf("r%d", time.Now().UnixNano()), "plain", `{}`))
		return err == nil && !got[0].IsError
	})
}

func TestApprovalHeldOnOneReplicaDecidedOnAnother(t *testing.T) {
	p, _ := startPolicyPool(t)
	ctx := dispatch.WithTenant(t.Context(), "acme")
	var rep policy.Report
	type outcome struct {
		res []envelope.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := p.a.Dispatch(policy.WithReport(ctx, &rep), "s", call("d1", "deploy", `{"env":"prod"}`))
		done <- outcome{res, err}
	}()
	var held []approval.Record
	natstest.Eventually(t, 10*time.Second, "the call is listed as pending", func() bool {
		held, _ = p.b.Approvals().List(t.Context(), false)
		return len(held) == 1
	})
	if r := held[0]; r.Tool != "deploy" || r.Tenant != "acme" || r.Session != "s" || string(r.Input) != `{"env":"prod"}` {
		t.Fatalf("the record: %+v", r)
	}
	if p.ran["deploy"].Load() != 0 {
		t.Fatal("a held call must not run")
	}
	if _, err := p.b.Approvals().Decide(t.Context(), held[0].ID, true, "alice", "", approval.ViaCLI); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil || o.res[0].IsError || p.ran["deploy"].Load() != 1 || rep.Approvals[0] != held[0].ID {
		t.Fatalf("approved: %v %+v, ran %d, report %v", o.err, o.res, p.ran["deploy"].Load(), rep.Approvals)
	}

	// Denied on the other replica, with a reason.
	go func() {
		res, err := p.b.Dispatch(ctx, "s", call("d2", "deploy", `{"env":"prod"}`))
		done <- outcome{res, err}
	}()
	id := approval.ID("acme", "s", "d2", "deploy", []byte(`{"env":"prod"}`))
	natstest.Eventually(t, 10*time.Second, "the second call is held", func() bool {
		r, err := p.a.Approvals().Get(t.Context(), id)
		return err == nil && r.State == approval.StatePending
	})
	if _, err := p.a.Approvals().Decide(t.Context(), id, false, "bob", "change freeze", approval.ViaConsole); err != nil {
		t.Fatal(err)
	}
	o = <-done
	if o.err != nil || o.res[0].Code != classify.CodeNotApproved || p.ran["deploy"].Load() != 1 {
		t.Fatalf("denied: %v %+v", o.err, o.res)
	}
	// Decided once: a second decision is refused, naming the first.
	if _, err := p.a.Approvals().Decide(t.Context(), id, true, "mallory", "", approval.ViaCLI); !errors.Is(err, approval.ErrAlreadyDecided) {
		t.Fatalf("a second decision: %v", err)
	}
}

func TestCacheAnsweredByAnotherReplica(t *testing.T) {
	p, _ := startPolicyPool(t)
	ctx := dispatch.WithTenant(t.Context(), "acme")
	var rep policy.Report
	got, err := p.a.Dispatch(policy.WithReport(ctx, &rep), "s1", call("c1", "search", `{"q":"nats","n":1}`))
	if err != nil || got[0].IsError || rep.Cache[0] != policy.CacheMiss {
		t.Fatalf("first: %v %+v %v", err, got, rep.Cache)
	}
	rep = policy.Report{}
	got2, err := p.b.Dispatch(policy.WithReport(ctx, &rep), "s2", call("c2", "search", "{ \"n\": 1,\n \"q\": \"nats\" }"))
	if err != nil || rep.Cache[0] != policy.CacheHit || got2[0].CallID != "c2" || got2[0].Content.Text() != got[0].Content.Text() {
		t.Fatalf("the same input, keys reordered, on the other replica: %v %+v %v", err, got2, rep.Cache)
	}
	if n := p.ran["search"].Load(); n != 1 {
		t.Fatalf("search ran %d times, want 1", n)
	}
	// Bypass runs it again.
	if _, err := p.b.Dispatch(policy.WithNoCache(ctx), "s2", call("c3", "search", `{"q":"nats","n":1}`)); err != nil || p.ran["search"].Load() != 2 {
		t.Fatalf("bypass: %v, ran %d", err, p.ran["search"].Load())
	}
	// Another tenant does not share it.
	if _, err := p.b.Dispatch(dispatch.WithTenant(t.Context(), "other"), "s", call("c4", "search", `{"q":"nats","n":1}`)); err != nil || p.ran["search"].Load() != 3 {
		t.Fatalf("another tenant: %v, ran %d", err, p.ran["search"].Load())
	}
}

func TestCoalescingFiftyIdenticalCallsRunsOnce(t *testing.T) {
	p, _ := startPolicyPool(t)
	ctx := dispatch.WithTenant(t.Context(), "acme")
	const n = 50
	var wg sync.WaitGroup
	results := make([]envelope.Result, n)
	for i := range n {
		o := p.a
		if i%2 == 1 {
			o = p.b
		}
		wg.Go(func() {
			got, err := o.Dispatch(ctx, fmt.Sprintf("s%d", i), call(fmt.Sprintf("c%d", i), "slow", `{"q":"same"}`))
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = got[0]
		})
	}
	natstest.Eventually(t, 10*time.Second, "the first run started", func() bool { return p.ran["slow"].Load() == 1 })
	// The others wait for it (coalesced), or, arriving after it ended,
	// find its result in the cache: either way the tool runs once.
	close(p.gate)
	wg.Wait()
	if ran := p.ran["slow"].Load(); ran != 1 {
		t.Fatalf("%d identical calls at once ran the tool %d times, want 1", n, ran)
	}
	for i, r := range results {
		if r.IsError || r.CallID != fmt.Sprintf("c%d", i) || r.Content.Text() != `slow ran with {"q":"same"}` {
			t.Fatalf("call %d: %+v", i, r)
		}
	}
}
