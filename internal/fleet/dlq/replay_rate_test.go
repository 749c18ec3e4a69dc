package dlq_test

import (
	"testing"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]float64{"0": 0, "5": 5, "5/s": 5, " 2/sec ": 2, "120/m": 2, "30/min": 0.5} {
		if got, err := dlq.ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "NaN", "Inf", "+Inf", "1e400", "5/h", "five"} {
		if got, err := dlq.ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %v, want an error", in, got)
		}
	}
}
