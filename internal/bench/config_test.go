package bench

import (
	"strings"
	"testing"
	"time"
)

func TestParseFailMix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    FailMix
		wantErr string
	}{
		{"", FailMix{}, ""},
		{"transient=0.2", FailMix{Transient: 0.2}, ""},
		{"transient=0.2,permanent=0.05", FailMix{Transient: 0.2, Permanent: 0.05}, ""},
		{" permanent = 1 ", FailMix{Permanent: 1}, ""},
		{"transient", FailMix{}, "want transient=FRACTION"},
		{"transient=abc", FailMix{}, "from 0 to 1"},
		{"transient=1.5", FailMix{}, "from 0 to 1"},
		{"transient=-0.1", FailMix{}, "from 0 to 1"},
		{"timeout=0.1", FailMix{}, `unknown failure kind "timeout"`},
		{"transient=0.6,permanent=0.6", FailMix{}, "more than 1"},
	} {
		got, err := ParseFailMix(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseFailMix(%q) error %v, want one containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseFailMix(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if back, err := ParseFailMix(got.String()); err != nil || back != got {
			t.Errorf("round trip of %q through %q gave %+v, %v", tc.in, got.String(), back, err)
		}
	}
}

func TestConfigValidateNamesTheProblem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Calls: 10, Duration: time.Second}, "not both"},
		{Config{Tool: "grep"}, `tool "grep"`},
		{Config{Payload: 5}, "payload must be at least"},
		{Config{Rate: -1}, "rate"},
		{Config{ExternalWorkers: true}, "external workers need a server URL"},
		{Config{Fail: FailMix{Transient: 0.8, Permanent: 0.8}}, "failure mix"},
	} {
		err := tc.cfg.withDefaults().validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("validate(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
	if err := (Config{}).withDefaults().validate(); err != nil {
		t.Errorf("the zero config with defaults is invalid: %v", err)
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := Config{Calls: 1001, Batch: 4}.withDefaults()
	if c.Calls != 1004 {
		t.Errorf("1001 calls in turns of 4 became %d, want 1004", c.Calls)
	}
	if c.Warmup != 200 || c.Workers != 1 || c.Concurrency != ConcurrencyDefault || c.Tool != ToolEcho {
		t.Errorf("defaults: %+v", c)
	}
	if c := (Config{}).withDefaults(); c.Calls != CallsDefault || c.Warmup != 2000 {
		t.Errorf("zero config: calls %d warmup %d", c.Calls, c.Warmup)
	}
	if got := echoInput(256); len(got) != 256 || !strings.HasPrefix(string(got), `{"text":"xx`) {
		t.Errorf("echoInput(256) = %d bytes %.20q", len(got), got)
	}
}
