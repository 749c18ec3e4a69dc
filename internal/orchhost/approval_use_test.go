package orchhost_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// An approval is for one run, through the whole pool. The approved call
// runs once; sent again to either replica while its result is kept, it is
// answered from that run and does not run again. Once TOOL_RESULTS no
// longer keeps the result (its max age shortened here, to wait it out),
// the call sent again is held again and does not run; approved again, it
// runs once more.
func TestApprovalIsForOneRun(t *testing.T) {
	p, pool := startPolicyPool(t)
	ctx := dispatch.WithTenant(t.Context(), "acme")
	const input = `{"env":"prod","change":42}`
	turn := call("u1", "deploy", input)
	id := approval.ID("acme", "s", "u1", "deploy", []byte(input))
	type outcome struct {
		res []envelope.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := p.a.Dispatch(ctx, "s", turn)
		done <- outcome{res, err}
	}()
	natstest.Eventually(t, 30*time.Second, "the call is held", func() bool {
		r, err := p.b.Approvals().Get(ctx, id)
		return err == nil && r.State == approval.StatePending
	})
	if _, err := p.b.Approvals().Decide(ctx, id, true, "alice", "ticket 7", approval.ViaCLI); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil || o.res[0].IsError || p.ran["deploy"].Load() != 1 {
		t.Fatalf("approved: %v %+v, ran %d", o.err, o.res, p.ran["deploy"].Load())
	}
	first := o.res[0].Content.Text()
	used, err := p.a.Approvals().Get(ctx, id)
	if err != nil || used.UsedAt.IsZero() {
		t.Fatalf("after the run: %+v, %v; want its use recorded", used, err)
	}

	// Sent again within the window, to the other replica and to the
	// first: answered from the run, not run again.
	for _, o := range []*pooltest.Orchestrator{p.b, p.a} {
		res, err := o.Dispatch(ctx, "s", turn)
		if err != nil || res[0].IsError || res[0].Content.Text() != first {
			t.Fatalf("sent again within the window: %+v, %v", res, err)
		}
	}
	if n := p.ran["deploy"].Load(); n != 1 {
		t.Fatalf("the call sent again within the window ran: %d runs", n)
	}
	if again, err := p.a.Approvals().Get(ctx, id); err != nil || again.Revision != used.Revision {
		t.Fatalf("the use was written again: %+v, %v", again, err)
	}

	// TOOL_RESULTS keeps results for a second from now on: the window
	// passes, and the call sent again is held again.
	const keep = time.Second
	st, err := pool.JS.Stream(ctx, jetstream.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxAge, cfg.Duplicates = keep, keep
	if _, err := pool.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, "TOOL_RESULTS to drop the run's result", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 0
	})
	time.Sleep(time.Until(used.Written.Add(keep)) + 200*time.Millisecond)
	var rep policy.Report
	res, err := p.b.Dispatch(policy.WithReport(policy.WithoutApprovalWait(ctx), &rep), "s", turn)
	if err != nil || res[0].Code != classify.CodeApprovalPending || len(rep.Approvals) != 1 || rep.Approvals[0] != id {
		t.Fatalf("sent again after the window: %+v, %v, %v; want approval_pending under the same approval", res, err, rep.Approvals)
	}
	if n := p.ran["deploy"].Load(); n != 1 {
		t.Fatalf("a spent approval's call ran: %d runs", n)
	}
	rec, err := p.a.Approvals().Get(ctx, id)
	if err != nil || rec.State != approval.StatePending || len(rec.Previous) != 1 || rec.Previous[0].ApprovedBy != "alice" ||
		!rec.Previous[0].UsedAt.Equal(used.UsedAt) {
		t.Fatalf("held again: %+v, %v", rec, err)
	}

	// Approved again: it runs once more. TOOL_RESULTS as it was (the new
	// run's result must outlive its delivery); on a replica of its own:
	// the first two still remember the first run's result in memory (their
	// call tables) and would answer from it.
	cfg.MaxAge, cfg.Duplicates = jetstream.ResultsMaxAgeDefault, jetstream.DuplicateWindowDefault
	if _, err := pool.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := p.a.Approvals().Decide(ctx, id, true, "bob", "", approval.ViaConsole); err != nil {
		t.Fatal(err)
	}
	c := pooltest.StartOrchestrator(t, natstest.Connect(t, pool.Srv.ClientURL()), p.cat)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err = c.Dispatch(cctx, "s", turn)
	if err != nil || res[0].IsError {
		t.Fatalf("approved again: %+v, %v", res, err)
	}
	if n := p.ran["deploy"].Load(); n != 2 {
		t.Fatalf("approved again, the call ran %d times in all, want 2", n)
	}
}
