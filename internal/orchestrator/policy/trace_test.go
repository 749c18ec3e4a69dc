package policy

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// eventValues lists, in order, the value of attribute k in span's events
// named name.
func eventValues(s sdktrace.ReadOnlySpan, name string, k attribute.Key) []string {
	var out []string
	for _, e := range s.Events() {
		if e.Name != name {
			continue
		}
		for _, kv := range e.Attributes {
			if kv.Key == k {
				out = append(out, kv.Value.AsString())
			}
		}
	}
	return out
}

func byName(spans []sdktrace.ReadOnlySpan) map[string]sdktrace.ReadOnlySpan {
	m := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		m[s.Name()] = s
	}
	return m
}

func TestGateSpans(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p := newGate(t, &countingNext{}, 6)
	p.g.cfg.Tracer = tracing.NewTracer(tp)
	p.a.decide("ap-d1", Decision{State: Approved, By: "ops"})
	ctx := acme(t.Context())

	// search (1) and pricey (5) spend the budget; deploy, approved, finds
	// it spent.
	res, err := p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{
		use("s1", "search", `{"q":1}`), use("p1", "pricey", `{}`), use("d1", "deploy", `{}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[2].Code != classify.CodeBudgetExhausted {
		t.Fatalf("deploy: %+v", res[2])
	}
	spans := byName(rec.Ended())
	if len(spans) != 3 {
		t.Fatalf("%d spans: %v", len(rec.Ended()), spans)
	}
	search, pricey, deploy := spans["call search"], spans["call pricey"], spans["call deploy"]
	if search == nil || pricey == nil || deploy == nil {
		t.Fatalf("spans: %v", spans)
	}
	if got := eventValues(search, eventCache, attrCacheOutcome); len(got) != 1 || got[0] != "miss" {
		t.Errorf("search cache events = %v, want [miss]", got)
	}
	if got := eventValues(pricey, eventBudget, attrBudgetOutcome); len(got) != 1 || got[0] != "charged" {
		t.Errorf("pricey budget events = %v, want [charged]", got)
	}
	if got := eventValues(deploy, eventApproval, attrApprovalOutcome); len(got) != 1 || got[0] != "approved" {
		t.Errorf("deploy approval events = %v, want [approved] (decided before it was held)", got)
	}
	if got := eventValues(deploy, eventBudget, attrBudgetName); len(got) != 1 || got[0] != "daily" {
		t.Errorf("deploy budget refusal names %v, want [daily]", got)
	}
	for _, kv := range deploy.Attributes() {
		if kv.Key == tracing.ErrorType && kv.Value.AsString() != "transient.budget_exhausted" {
			t.Errorf("deploy error.type = %q", kv.Value.AsString())
		}
	}
	if got := eventValues(deploy, "result", tracing.Outcome); len(got) != 1 || got[0] != "error" {
		t.Errorf("deploy result events = %v", got)
	}

	// The same search again: a cache hit, one span, no run.
	rec.Reset()
	if _, err := p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{use("s2", "search", `{"q":1}`)}); err != nil {
		t.Fatal(err)
	}
	hit := byName(rec.Ended())["call search"]
	if hit == nil {
		t.Fatal("no span for the cache hit")
	}
	if got := eventValues(hit, eventCache, attrCacheOutcome); len(got) != 1 || got[0] != "hit" {
		t.Errorf("cache events = %v, want [hit]", got)
	}
	if n := p.next.count("search"); n != 1 {
		t.Errorf("search ran %d times", n)
	}
}

func TestGateSpansHeldThenDenied(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p := newGate(t, &countingNext{}, 0)
	p.g.cfg.Tracer = tracing.NewTracer(tp)
	done := make(chan error, 1)
	go func() {
		_, err := p.g.Dispatch(t.Context(), "", []envelope.ToolUseBlock{use("d2", "deploy", `{}`)})
		done <- err
	}()
	natstest.Eventually(t, 5*time.Second, "the call is held", func() bool { return p.a.isHeld("ap-d2") })
	p.a.decide("ap-d2", Decision{State: Denied, By: "ops", Reason: "no"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sp := byName(rec.Ended())["call deploy"]
	if sp == nil {
		t.Fatal("no span")
	}
	got := eventValues(sp, eventApproval, attrApprovalOutcome)
	if len(got) != 2 || got[0] != "held" || got[1] != "denied" {
		t.Errorf("approval events = %v, want [held denied]", got)
	}
	ids := eventValues(sp, eventApproval, attrApprovalID)
	if len(ids) != 2 || ids[0] != "ap-d2" {
		t.Errorf("approval ids = %v", ids)
	}
}
