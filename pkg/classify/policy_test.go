package classify

import (
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// fixedRand always returns v: 0.5 means no jitter.
type fixedRand float64

func (r fixedRand) Float64() float64 { return float64(r) }

const noJitter = fixedRand(0.5)

func TestWithDefaults(t *testing.T) {
	t.Parallel()
	def := Policy{MaxAttempts: MaxAttemptsDefault, BaseDelay: BaseDelayDefault, MaxDelay: MaxDelayDefault, Jitter: JitterDefault}
	if got := (Policy{}).WithDefaults(); got != def {
		t.Errorf("zero Policy: %+v, want %+v", got, def)
	}
	set := Policy{MaxAttempts: 5, BaseDelay: 200 * time.Millisecond, MaxDelay: 2 * time.Second, Jitter: 0.1}
	if got := set.WithDefaults(); got != set {
		t.Errorf("set fields changed: %+v, want %+v", got, set)
	}
	part := Policy{MaxAttempts: 7}.WithDefaults()
	if part.MaxAttempts != 7 || part.BaseDelay != BaseDelayDefault || part.MaxDelay != MaxDelayDefault || part.Jitter != JitterDefault {
		t.Errorf("partial: %+v", part)
	}
	// Negative values are not "unset": Validate rejects them.
	if got := (Policy{BaseDelay: -time.Second}).WithDefaults(); got.BaseDelay != -time.Second {
		t.Errorf("negative BaseDelay replaced: %v", got.BaseDelay)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	ok := Policy{}.WithDefaults()
	tests := []struct {
		name  string
		p     Policy
		field string // "" = valid
	}{
		{"defaults", ok, ""},
		{"one attempt", Policy{MaxAttempts: 1, BaseDelay: 1, MaxDelay: 1}, ""},
		{"100 attempts", Policy{MaxAttempts: 100, BaseDelay: time.Second, MaxDelay: time.Second, Jitter: 1}, ""},
		{"no jitter", Policy{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: time.Minute, Jitter: 0}, ""},
		{"zero attempts", Policy{BaseDelay: time.Second, MaxDelay: time.Second}, "MaxAttempts"},
		{"negative attempts", Policy{MaxAttempts: -1, BaseDelay: time.Second, MaxDelay: time.Second}, "MaxAttempts"},
		{"101 attempts", Policy{MaxAttempts: 101, BaseDelay: time.Second, MaxDelay: time.Second}, "MaxAttempts"},
		{"zero base", Policy{MaxAttempts: 3, MaxDelay: time.Second}, "BaseDelay"},
		{"negative base", Policy{MaxAttempts: 3, BaseDelay: -1, MaxDelay: time.Second}, "BaseDelay"},
		{"max below base", Policy{MaxAttempts: 3, BaseDelay: time.Minute, MaxDelay: time.Second}, "MaxDelay"},
		{"negative jitter", Policy{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: time.Second, Jitter: -0.1}, "Jitter"},
		{"jitter above 1", Policy{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: time.Second, Jitter: 1.5}, "Jitter"},
		{"NaN jitter", Policy{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: time.Second, Jitter: math.NaN()}, "Jitter"},
		{"defaults then a bad base", Policy{BaseDelay: time.Minute}.WithDefaults(), "MaxDelay"},
	}
	for _, tc := range tests {
		err := tc.p.Validate()
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
		case tc.field != "" && err == nil:
			t.Errorf("%s: Validate() = nil, want an error naming %s", tc.name, tc.field)
		case tc.field != "" && (!strings.Contains(err.Error(), tc.field) || !errors.Is(err, ErrInvalidPolicy)):
			t.Errorf("%s: Validate() = %v, want an ErrInvalidPolicy naming %s", tc.name, err, tc.field)
		}
	}
}

// wantExponential is min(base·2^(n-1), max), computed without the backoff
// library, to cross-check it.
func wantExponential(base, max time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

func TestDelayExponential(t *testing.T) {
	t.Parallel()
	p := Policy{}.WithDefaults()
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30} // seconds, after attempts 1..8
	for i, w := range want {
		n := i + 1
		if got := p.Delay(n, 0, noJitter); got != w*time.Second {
			t.Errorf("Delay(%d) = %v, want %v", n, got, w*time.Second)
		}
	}
	if got := p.Delay(0, 0, noJitter); got != time.Second {
		t.Errorf("Delay(0) = %v, want the base delay", got)
	}
	if got := p.Delay(1_000_000, 0, noJitter); got != 30*time.Second {
		t.Errorf("Delay(1e6) = %v, want the max delay", got)
	}
	// Cross-check against the closed form for other shapes.
	for _, q := range []Policy{
		{BaseDelay: 100 * time.Millisecond, MaxDelay: 10 * time.Second},
		{BaseDelay: 3 * time.Second, MaxDelay: 20 * time.Second},
		{BaseDelay: time.Second, MaxDelay: time.Second},
		{BaseDelay: time.Nanosecond, MaxDelay: time.Hour},
	} {
		for n := 1; n <= 45; n++ {
			if got, w := q.Delay(n, 0, noJitter), wantExponential(q.BaseDelay, q.MaxDelay, n); got != w {
				t.Errorf("%+v: Delay(%d) = %v, want %v", q, n, got, w)
			}
		}
	}
}

func TestDelayJitterBand(t *testing.T) {
	t.Parallel()
	p := Policy{}.WithDefaults() // ±25%
	rnd := rand.New(rand.NewPCG(1, 2))
	const n = 2 // 2s ± 0.5s
	lo, hi := 1500*time.Millisecond, 2500*time.Millisecond
	minSeen, maxSeen := time.Duration(math.MaxInt64), time.Duration(0)
	for range 1000 {
		d := p.Delay(n, 0, rnd)
		if d < lo || d > hi {
			t.Fatalf("Delay(%d) = %v, outside the jitter band [%v, %v]", n, d, lo, hi)
		}
		minSeen, maxSeen = min(minSeen, d), max(maxSeen, d)
	}
	if spread := maxSeen - minSeen; float64(spread) < 0.8*float64(hi-lo) {
		t.Errorf("1000 samples spread over %v (%v..%v), want at least 80%% of %v", spread, minSeen, maxSeen, hi-lo)
	}
	// The edges of the random source map to the edges of the band.
	if got := p.Delay(n, 0, fixedRand(0)); got != lo {
		t.Errorf("rand 0: %v, want %v", got, lo)
	}
	if got := p.Delay(n, 0, fixedRand(math.Nextafter(1, 0))); got < hi-time.Microsecond || got > hi {
		t.Errorf("rand →1: %v, want just under %v", got, hi)
	}
}

func TestDelayNeverAboveMax(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, p := range []Policy{{}, {Jitter: 1}, {BaseDelay: 20 * time.Second, Jitter: 0.5}} {
		p = p.WithDefaults()
		for n := 1; n <= 12; n++ {
			for _, r := range []Rand{fixedRand(0), fixedRand(0.999999), rnd, nil} {
				for _, ra := range []time.Duration{0, time.Second, time.Hour} {
					if d := p.Delay(n, ra, r); d > p.MaxDelay || d < 0 {
						t.Fatalf("%+v: Delay(%d, %v) = %v, outside [0, %v]", p, n, ra, d, p.MaxDelay)
					}
				}
			}
		}
	}
	// At the cap, upward jitter is cut off at max.
	if d := (Policy{}).Delay(6, 0, fixedRand(0.99)); d != MaxDelayDefault {
		t.Errorf("Delay at the cap with upward jitter = %v, want %v", d, MaxDelayDefault)
	}
}

func TestDelayRetryAfter(t *testing.T) {
	t.Parallel()
	p := Policy{}.WithDefaults()
	tests := []struct {
		n          int
		retryAfter time.Duration
		rnd        Rand
		want       time.Duration
	}{
		{1, 10 * time.Second, noJitter, 10 * time.Second},     // raises
		{1, 10 * time.Second, fixedRand(0), 10 * time.Second}, // raises above jitter too
		{1, 500 * time.Millisecond, noJitter, time.Second},    // never lowers
		{3, time.Second, noJitter, 4 * time.Second},           // never lowers
		{1, 5 * time.Minute, noJitter, 30 * time.Second},      // capped at max
		{1, 5 * time.Minute, fixedRand(0), 30 * time.Second},  // capped at max
		{1, -time.Second, noJitter, time.Second},              // negative ignored
	}
	for _, tc := range tests {
		if got := p.Delay(tc.n, tc.retryAfter, tc.rnd); got != tc.want {
			t.Errorf("Delay(%d, %v) = %v, want %v", tc.n, tc.retryAfter, got, tc.want)
		}
	}
}

func TestDelayDeterministic(t *testing.T) {
	t.Parallel()
	p := Policy{}.WithDefaults()
	a, b := rand.New(rand.NewPCG(7, 7)), rand.New(rand.NewPCG(7, 7))
	other := rand.New(rand.NewPCG(8, 8))
	differs := false
	for n := 1; n <= 20; n++ {
		da, db := p.Delay(n%5+1, 0, a), p.Delay(n%5+1, 0, b)
		if da != db {
			t.Fatalf("same seed, sample %d: %v != %v", n, da, db)
		}
		if p.Delay(n%5+1, 0, other) != da {
			differs = true
		}
	}
	if !differs {
		t.Error("a different seed gave the same 20 delays: jitter is not random")
	}
	// nil uses the global source and stays in the band.
	for range 100 {
		if d := p.Delay(1, 0, nil); d < 750*time.Millisecond || d > 1250*time.Millisecond {
			t.Fatalf("nil rand: Delay(1) = %v, outside [750ms, 1.25s]", d)
		}
	}
}

// Every attempt outcome, attempt number and deadline: the CaseAttempt part
// of the decision, exhaustively.
func TestDecideAttempt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p := Policy{}.WithDefaults() // 3 attempts, 1s, 30s

	decisions := []struct {
		name string
		d    Decision
	}{
		{"success", Decision{}},
		{"validation", Classify(Invalid("q", "is required"))},
		{"permanent", Classify(httpErr(404))},
		{"internal", Classify(errors.New("odd"))},
		{"panic", Classify(&PanicError{Value: 1})},
		{"transient", Classify(&TimeoutError{})},
		{"transient, Retry-After 20s", Classify(httpErr(429, "Retry-After", "20"))},
		{"transient, not retryable (call deadline)", Classify(errCallDeadline)},
		{"forced transient", Classify(Transient(httpErr(404)))},
		{"forced permanent", Classify(Permanent(httpErr(503)))},
	}
	deadlines := []struct {
		name string
		at   time.Time
	}{
		{"no deadline", time.Time{}},
		{"far", now.Add(time.Hour)},
		{"1.5s away", now.Add(1500 * time.Millisecond)},
		{"exactly 2s away", now.Add(2 * time.Second)},
		{"passed", now.Add(-time.Second)},
	}
	// expectedDelay: the jitter-free delay after attempt n.
	expectedDelay := func(d Decision, n int) time.Duration {
		base := []time.Duration{0, time.Second, 2 * time.Second}[n]
		return max(base, d.RetryAfter)
	}
	for _, dc := range decisions {
		for n := 1; n <= 4; n++ {
			for _, dl := range deadlines {
				got := p.Decide(Delivery{Decision: dc.d, Attempt: n, Now: now, Deadline: dl.at}, noJitter)
				var want Verdict
				switch {
				case dc.d.Class == envelope.ClassNone:
					want = Verdict{Fate: FateSuccess}
				case !dc.d.Retryable:
					want = Verdict{Fate: FateError}
				case n >= 3:
					want = Verdict{Fate: FateDeadLetter, Reason: FateExhausted}
				case !dl.at.IsZero() && !now.Add(expectedDelay(dc.d, n)).Before(dl.at):
					want = Verdict{Fate: FateError, GaveUp: true}
				default:
					want = Verdict{Fate: FateRetry, Delay: expectedDelay(dc.d, n)}
				}
				if got != want {
					t.Errorf("%s, attempt %d, %s: Decide = %+v, want %+v", dc.name, n, dl.name, got, want)
				}
			}
		}
	}
}

// Spelled-out cases of the table above, to read.
func TestDecideExamples(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	timeout := Classify(&TimeoutError{})
	tests := []struct {
		name     string
		p        Policy
		d        Decision
		n        int
		deadline time.Time
		want     Verdict
	}{
		{"success replies", Policy{}, Decision{}, 1, time.Time{}, Verdict{Fate: FateSuccess}},
		{"file not found replies at once", Policy{}, Classify(fs.ErrNotExist), 1, time.Time{}, Verdict{Fate: FateError}},
		{"validation replies at once", Policy{}, Classify(Invalid("q", "bad")), 1, time.Time{}, Verdict{Fate: FateError}},
		{"timeout, attempt 1: retry after 1s", Policy{}, timeout, 1, time.Time{}, Verdict{Fate: FateRetry, Delay: time.Second}},
		{"timeout, attempt 2: retry after 2s", Policy{}, timeout, 2, time.Time{}, Verdict{Fate: FateRetry, Delay: 2 * time.Second}},
		{"timeout, attempt 3 of 3: dead-letter", Policy{}, timeout, 3, time.Time{}, Verdict{Fate: FateDeadLetter, Reason: FateExhausted}},
		{"one attempt only: dead-letter at once", Policy{MaxAttempts: 1}, timeout, 1, time.Time{}, Verdict{Fate: FateDeadLetter, Reason: FateExhausted}},
		{"delay would pass the deadline: give up", Policy{}, timeout, 2, now.Add(time.Second), Verdict{Fate: FateError, GaveUp: true}},
		{"Retry-After past the deadline: give up", Policy{}, Classify(httpErr(429, "Retry-After", "20")), 1, now.Add(10 * time.Second),
			Verdict{Fate: FateError, GaveUp: true}},
		{"Retry-After capped by MaxDelay", Policy{MaxDelay: 5 * time.Second}, Classify(httpErr(429, "Retry-After", "20")), 1, time.Time{},
			Verdict{Fate: FateRetry, Delay: 5 * time.Second}},
	}
	for _, tc := range tests {
		got := tc.p.Decide(Delivery{Decision: tc.d, Attempt: tc.n, Now: now, Deadline: tc.deadline}, noJitter)
		if got != tc.want {
			t.Errorf("%s: Decide = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// Every case a delivery can be in, and the verdict each gets: together with
// TestDecideAttempt, every fate and every dead-letter reason a call can get.
func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	timeout := Classify(&TimeoutError{})
	slow := Policy{BaseDelay: 3 * time.Second}
	tests := []struct {
		name string
		p    Policy
		d    Delivery
		want Verdict
	}{
		{"success: reply", Policy{}, Delivery{Attempt: 1}, Verdict{Fate: FateSuccess}},
		{"permanent error: reply", Policy{}, Delivery{Decision: Classify(fs.ErrNotExist), Attempt: 1}, Verdict{Fate: FateError}},
		{"retryable, attempts left: retry after a delay", Policy{}, Delivery{Decision: timeout, Attempt: 1, Now: now},
			Verdict{Fate: FateRetry, Delay: time.Second}},
		{"retryable, past the deadline: give up", Policy{}, Delivery{Decision: timeout, Attempt: 1, Now: now, Deadline: now.Add(time.Second)},
			Verdict{Fate: FateError, GaveUp: true}},
		{"retryable, exhausted: dead-letter", Policy{}, Delivery{Decision: timeout, Attempt: 3},
			Verdict{Fate: FateDeadLetter, Reason: FateExhausted}},
		{"stored: answer from it", Policy{}, Delivery{Case: CaseStored, Attempt: 2}, Verdict{Fate: FateStored}},
		{"malformed: dead-letter and terminate", Policy{}, Delivery{Case: CaseMalformed, Attempt: 1},
			Verdict{Fate: FateDeadLetter, Reason: FateMalformed}},
		{"expired: dead-letter", Policy{}, Delivery{Case: CaseExpired, Attempt: 1}, Verdict{Fate: FateDeadLetter, Reason: FateExpired}},
		{"poison: dead-letter", Policy{}, Delivery{Case: CasePoison, Attempt: 5}, Verdict{Fate: FateDeadLetter, Reason: FatePoison}},
		{"started before: outcome unknown", Policy{}, Delivery{Case: CaseStartedBefore, Attempt: 2},
			Verdict{Fate: FateOutcomeUnknown, Reason: FateOutcomeUnknown}},
		{"shutdown: hand back at once", Policy{}, Delivery{Case: CaseShutdown, Attempt: 1}, Verdict{Fate: FateHandedBack}},
		{"cancelled by the caller: ack, no retry, no dead letter", Policy{}, Delivery{Case: CaseCancelled, Attempt: 1},
			Verdict{Fate: FateCancelled}},
		{"cancelled by the caller, attempts exhausted: still no dead letter", Policy{}, Delivery{Case: CaseCancelled, Attempt: 3},
			Verdict{Fate: FateCancelled}},
		{"store failed: hand back after the base delay", Policy{}, Delivery{Case: CaseStoreFailed, Attempt: 1},
			Verdict{Fate: FateHandedBack, Delay: BaseDelayDefault}},
		{"store failed, the tool's base delay", slow, Delivery{Case: CaseStoreFailed, Attempt: 1},
			Verdict{Fate: FateHandedBack, Delay: 3 * time.Second}},
		{"unknown case: hand back after the base delay", Policy{}, Delivery{Case: Case(99), Attempt: 1},
			Verdict{Fate: FateHandedBack, Delay: BaseDelayDefault}},
	}
	fates := map[Fate]bool{}
	reasons := map[Fate]bool{}
	for _, tc := range tests {
		got := tc.p.Decide(tc.d, noJitter)
		if got != tc.want {
			t.Errorf("%s: Decide = %+v, want %+v", tc.name, got, tc.want)
		}
		fates[got.Fate] = true
		if got.Reason != "" {
			reasons[got.Reason] = true
		}
	}
	for _, f := range []Fate{FateSuccess, FateError, FateRetry, FateDeadLetter, FateHandedBack, FateStored, FateOutcomeUnknown, FateCancelled} {
		if !fates[f] {
			t.Errorf("no case decides %s", f)
		}
	}
	for _, r := range DeadLetterReasons() {
		if !reasons[r] {
			t.Errorf("no case dead-letters for %s", r)
		}
	}
	if len(reasons) != len(DeadLetterReasons()) {
		t.Errorf("reasons decided %v; want exactly %v", reasons, DeadLetterReasons())
	}
}

// What each verdict does to the call message.
func TestVerdictSteps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v                                          Verdict
		deadLetters, terminates, requeues, answers bool
	}{
		{Verdict{Fate: FateSuccess}, false, false, false, true},
		{Verdict{Fate: FateError}, false, false, false, true},
		{Verdict{Fate: FateStored}, false, false, false, true},
		{Verdict{Fate: FateRetry, Delay: time.Second}, false, false, true, false},
		{Verdict{Fate: FateHandedBack}, false, false, true, false},
		{Verdict{Fate: FateDeadLetter, Reason: FateExhausted}, true, false, false, true},
		{Verdict{Fate: FateDeadLetter, Reason: FateExpired}, true, false, false, true},
		{Verdict{Fate: FateDeadLetter, Reason: FatePoison}, true, false, false, true},
		{Verdict{Fate: FateDeadLetter, Reason: FateMalformed}, true, true, false, false},
		{Verdict{Fate: FateOutcomeUnknown, Reason: FateOutcomeUnknown}, true, false, false, true},
		{Verdict{Fate: FateCancelled}, false, false, false, false},
	}
	for _, tc := range tests {
		if got := tc.v.DeadLetters(); got != tc.deadLetters {
			t.Errorf("%+v.DeadLetters() = %v", tc.v, got)
		}
		if got := tc.v.Terminates(); got != tc.terminates {
			t.Errorf("%+v.Terminates() = %v", tc.v, got)
		}
		if got := tc.v.Requeues(); got != tc.requeues {
			t.Errorf("%+v.Requeues() = %v", tc.v, got)
		}
		if got := tc.v.Answers(); got != tc.answers {
			t.Errorf("%+v.Answers() = %v", tc.v, got)
		}
	}
}

func TestCaseString(t *testing.T) {
	t.Parallel()
	for c, want := range map[Case]string{
		CaseAttempt: "attempt", CaseStored: "stored", CaseMalformed: "malformed", CaseExpired: "expired",
		CaseStartedBefore: "started_before", CaseShutdown: "shutdown", CaseStoreFailed: "store_failed",
		CasePoison: "poison", CaseCancelled: "cancelled", Case(99): "Case(99)",
	} {
		if got := c.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(c), got, want)
		}
	}
}

// The fates are wire and label values: byte for byte.
func TestFateValues(t *testing.T) {
	t.Parallel()
	for f, want := range map[Fate]string{
		FateSuccess: "success", FateError: "error", FateRetry: "retry", FateDeadLetter: "dead_letter",
		FateHandedBack: "handed_back", FateStored: "stored", FateOutcomeUnknown: "outcome_unknown", FateCancelled: "cancelled",
		FateExhausted: "exhausted", FateMalformed: "malformed", FatePoison: "poison", FateExpired: "expired",
	} {
		if string(f) != want {
			t.Errorf("%q, want %q", f, want)
		}
	}
	if got, want := DeadLetterReasonList(), "exhausted, malformed, poison, expired or outcome_unknown"; got != want {
		t.Errorf("DeadLetterReasonList() = %q, want %q", got, want)
	}
	rs := DeadLetterReasons()
	rs[0] = "changed"
	if DeadLetterReasons()[0] != FateExhausted {
		t.Error("DeadLetterReasons returned its own array")
	}
	for _, r := range DeadLetterReasons() {
		if got, err := ParseDeadLetterReason(string(r)); err != nil || got != r || !r.IsDeadLetterReason() {
			t.Errorf("ParseDeadLetterReason(%q) = %q, %v", r, got, err)
		}
	}
	if got, err := ParseDeadLetterReason(""); err != nil || got != "" {
		t.Errorf(`ParseDeadLetterReason("") = %q, %v; want no reason`, got, err)
	}
	for _, bad := range []string{"retry", "success", "Exhausted", "other"} {
		if _, err := ParseDeadLetterReason(bad); err == nil || !strings.Contains(err.Error(), DeadLetterReasonList()) {
			t.Errorf("ParseDeadLetterReason(%q): error %v; want one listing the reasons", bad, err)
		}
	}
}
