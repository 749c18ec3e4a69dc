package tools

import (
	"fmt"
	"strings"
	"time"
)

// FairnessFieldMaxBytes caps the field name of an "input.<field>"
// fairness key.
const FairnessFieldMaxBytes = 64

// CheckFairness says why f is not a valid Tool.Fairness, or returns "":
// f must be "" (the tenant), FairnessTenant, FairnessSession, or
// FairnessInputPrefix followed by the name of a top-level field of the
// input (1 to FairnessFieldMaxBytes printable characters, no '.' or
// space).
func CheckFairness(f string) string {
	switch f {
	case "", FairnessTenant, FairnessSession:
		return ""
	}
	field, ok := strings.CutPrefix(f, FairnessInputPrefix)
	if !ok {
		return fmt.Sprintf("must be %s, %s or %s<field> (a top-level field of the input), not %q",
			FairnessTenant, FairnessSession, FairnessInputPrefix, f)
	}
	if field == "" || len(field) > FairnessFieldMaxBytes {
		return fmt.Sprintf("must name a top-level field of the input after %q (1 to %d characters), not %q",
			FairnessInputPrefix, FairnessFieldMaxBytes, f)
	}
	for _, r := range field {
		if r <= ' ' || r == '.' || r == 0x7f {
			return fmt.Sprintf("names the field %q, which is not a top-level field name (no '.', spaces or control characters)", field)
		}
	}
	return ""
}

// Check returns the first field of l that is wrong, as RegisterError.Field
// names it ("per_key.rate"), and why; "", "" when l is valid. No field
// may be negative, and Per and Burst need Rate.
func (l KeyLimits) Check() (field, reason string) {
	switch {
	case l.Concurrency < 0:
		return "per_key.concurrency", fmt.Sprintf("must be >= 0, got %d", l.Concurrency)
	case l.Rate < 0:
		return "per_key.rate", fmt.Sprintf("must be >= 0, got %d", l.Rate)
	case l.Per < 0:
		return "per_key.per", fmt.Sprintf("must be >= 0, got %v", l.Per)
	case l.Burst < 0:
		return "per_key.burst", fmt.Sprintf("must be >= 0, got %d", l.Burst)
	case l.Rate == 0 && l.Per > 0:
		return "per_key.per", "is the period of per_key.rate, which is not set"
	case l.Rate == 0 && l.Burst > 0:
		return "per_key.burst", "is the burst of per_key.rate, which is not set"
	}
	return "", ""
}

// WithDefaults returns l with the defaults of a rate limit applied: Per
// time.Second and Burst Rate when Rate is set.
func (l KeyLimits) WithDefaults() KeyLimits {
	if l.Rate > 0 {
		if l.Per == 0 {
			l.Per = time.Second
		}
		if l.Burst == 0 {
			l.Burst = l.Rate
		}
	}
	return l
}

// checkFairShares checks t's Fairness and PerKey (Register's part).
func checkFairShares(t *Tool) *RegisterError {
	if reason := CheckFairness(t.Fairness); reason != "" {
		return fieldError("fairness", "fairness", reason)
	}
	if field, reason := t.PerKey.Check(); field != "" {
		return fieldError(field, field, reason)
	}
	return nil
}
