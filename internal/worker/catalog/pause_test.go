package catalog

import (
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/tools"
)

func TestPauseOnRateLimitAbove(t *testing.T) {
	t.Parallel()
	const file = `tools:
  - name: quota
    description: A service with a strict quota.
    input_schema: {type: object}
    pause_on_rate_limit_above: 5s
    backend: webhook
    webhook: {url: "https://quota.example.com/"}
  - name: read_file
    pause_on_rate_limit_above: 1m
    backend: builtin
`
	f, err := Parse("tools.yaml", []byte(file), Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := f.Entry("quota")
	if e.PauseOn429Above != 5*time.Second {
		t.Errorf("entry PauseOn429Above = %v, want 5s", e.PauseOn429Above)
	}
	ts, err := f.Tools(map[string]tools.Tool{"read_file": {Name: "read_file"}})
	if err != nil {
		t.Fatal(err)
	}
	if ts[0].PauseOn429Above != 5*time.Second || ts[1].PauseOn429Above != time.Minute {
		t.Errorf("tools' PauseOn429Above = %v, %v; want 5s, 1m", ts[0].PauseOn429Above, ts[1].PauseOn429Above)
	}

	for value, want := range map[string]string{
		"0s":    `tools.yaml:5: tool "quota": pause_on_rate_limit_above: must be positive, got 0s (leave it out to never pause)`,
		"-1s":   `tool "quota": pause_on_rate_limit_above: must be positive`,
		"later": `tool "quota": pause_on_rate_limit_above: `,
	} {
		_, err := Parse("tools.yaml", []byte(strings.Replace(file, "5s", value, 1)), Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("pause_on_rate_limit_above: %s: %v, want an error containing %q", value, err, want)
		}
	}
}
