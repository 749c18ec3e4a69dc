package settle_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/pkg/classify"
)

// fakeMsg records the verbs Settle calls, in order, and fails the ones
// named in fail.
type fakeMsg struct {
	calls []string
	fail  map[string]error
}

func (m *fakeMsg) do(verb string) error {
	m.calls = append(m.calls, verb)
	return m.fail[verb]
}

func (m *fakeMsg) PublishDeadLetter(_ context.Context, e *settle.Entry, id string) error {
	return m.do("dead-letter " + string(e.Reason) + " " + id)
}
func (m *fakeMsg) PublishResult(_ context.Context, data []byte) error {
	return m.do("result " + string(data))
}
func (m *fakeMsg) Ack(context.Context) error { return m.do("ack") }
func (m *fakeMsg) Nak(_ context.Context, d time.Duration) error {
	return m.do("nak " + d.String())
}
func (m *fakeMsg) Term(_ context.Context, reason string) error { return m.do("term " + reason) }

// Every verdict Decide gives is carried out in the order that loses no
// call: dead letter, result, then the message's verb.
func TestSettle(t *testing.T) {
	t.Parallel()
	p := classify.Policy{}
	decide := func(c classify.Case, d classify.Decision, n int) classify.Verdict {
		return p.Decide(classify.Delivery{Case: c, Decision: d, Attempt: n}, fixedJitter{})
	}
	timeout := classify.Classify(&classify.TimeoutError{})
	letter := func(r classify.Fate) *settle.Entry {
		e := settle.NewEntry(r, "echo", "toolu_1", []byte(`{}`))
		e.Error = "bad envelope"
		return &e
	}
	res := []byte(`{"r":1}`)
	tests := []struct {
		name string
		s    settle.Settlement
		want []string
	}{
		{"success", settle.Settlement{Verdict: decide(classify.CaseAttempt, classify.Decision{}, 1), Result: res},
			[]string{`result {"r":1}`, "ack"}},
		{"success, no caller", settle.Settlement{Verdict: decide(classify.CaseAttempt, classify.Decision{}, 1)}, []string{"ack"}},
		{"error", settle.Settlement{Verdict: decide(classify.CaseAttempt, classify.Classify(errors.New("x")), 1), Result: res},
			[]string{`result {"r":1}`, "ack"}},
		{"retry", settle.Settlement{Verdict: decide(classify.CaseAttempt, timeout, 1)}, []string{"nak 1s"}},
		{"exhausted", settle.Settlement{Verdict: decide(classify.CaseAttempt, timeout, 3), Letter: letter(classify.FateExhausted), LetterID: "k", Result: res},
			[]string{"dead-letter exhausted k", `result {"r":1}`, "ack"}},
		{"stored", settle.Settlement{Verdict: decide(classify.CaseStored, classify.Decision{}, 2), Result: res},
			[]string{`result {"r":1}`, "ack"}},
		{"malformed", settle.Settlement{Verdict: decide(classify.CaseMalformed, classify.Decision{}, 1), Letter: letter(classify.FateMalformed), LetterID: "m"},
			[]string{"dead-letter malformed m", "term malformed call: bad envelope"}},
		{"expired", settle.Settlement{Verdict: decide(classify.CaseExpired, classify.Decision{}, 1), Letter: letter(classify.FateExpired), LetterID: "k", Result: res},
			[]string{"dead-letter expired k", `result {"r":1}`, "ack"}},
		{"poison", settle.Settlement{Verdict: decide(classify.CasePoison, classify.Decision{}, 5), Letter: letter(classify.FatePoison), LetterID: "k"},
			[]string{"dead-letter poison k", "ack"}},
		{"outcome unknown", settle.Settlement{Verdict: decide(classify.CaseStartedBefore, classify.Decision{}, 2), Letter: letter(classify.FateOutcomeUnknown), LetterID: "k", Result: res},
			[]string{"dead-letter outcome_unknown k", `result {"r":1}`, "ack"}},
		{"shutdown", settle.Settlement{Verdict: decide(classify.CaseShutdown, classify.Decision{}, 1)}, []string{"nak 0s"}},
		{"store failed", settle.Settlement{Verdict: decide(classify.CaseStoreFailed, classify.Decision{}, 1)}, []string{"nak 1s"}},
	}
	for _, tc := range tests {
		m := &fakeMsg{}
		if err := settle.Settle(context.Background(), m, tc.s); err != nil {
			t.Errorf("%s: Settle: %v", tc.name, err)
		}
		if !reflect.DeepEqual(m.calls, tc.want) {
			t.Errorf("%s: verbs %q, want %q", tc.name, m.calls, tc.want)
		}
	}
}

// A failed publish stops the settle before the message's verb, as a
// *settle.PublishError; a failed verb returns its error.
func TestSettleFailures(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	v := classify.Verdict{Fate: classify.FateDeadLetter, Reason: classify.FateExhausted}
	e := settle.NewEntry(classify.FateExhausted, "echo", "toolu_1", []byte(`{}`))
	for _, tc := range []struct {
		fail     string
		what     string
		wantRest []string
	}{
		{"dead-letter exhausted k", "dead letter", []string{"dead-letter exhausted k"}},
		{"result r", "result", []string{"dead-letter exhausted k", "result r"}},
	} {
		m := &fakeMsg{fail: map[string]error{tc.fail: boom}}
		err := settle.Settle(context.Background(), m, settle.Settlement{Verdict: v, Letter: &e, LetterID: "k", Result: []byte("r")})
		var pe *settle.PublishError
		if !errors.As(err, &pe) || pe.What != tc.what || !errors.Is(err, boom) {
			t.Errorf("failing %q: error %v; want a PublishError of the %s wrapping boom", tc.fail, err, tc.what)
		}
		if !reflect.DeepEqual(m.calls, tc.wantRest) {
			t.Errorf("failing %q: verbs %q, want %q", tc.fail, m.calls, tc.wantRest)
		}
	}
	m := &fakeMsg{fail: map[string]error{"ack": boom}}
	if err := settle.Settle(context.Background(), m, settle.Settlement{Verdict: classify.Verdict{Fate: classify.FateSuccess}}); !errors.Is(err, boom) {
		t.Errorf("failing ack: error %v, want boom", err)
	}
	if err := settle.Settle(context.Background(), &fakeMsg{}, settle.Settlement{Verdict: v}); err == nil {
		t.Error("a dead-letter verdict without its dead letter settled")
	}
}

// fixedJitter is no jitter.
type fixedJitter struct{}

func (fixedJitter) Float64() float64 { return 0.5 }
