package worker_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/tools"
)

// WithDefaults fills every zero field with its documented default, the
// logger with slog.Default(), and keeps what is set.
func TestConfigWithDefaults(t *testing.T) {
	t.Parallel()
	c := worker.Config{}.WithDefaults()
	if c.Concurrency != worker.ConcurrencyDefault || c.DrainTimeout != worker.DrainTimeoutDefault ||
		c.PublishTimeout != worker.PublishTimeoutDefault || c.AbandonGrace != worker.AbandonGraceDefault ||
		c.PublishRetryFor != worker.PublishRetryForDefault || c.HistoryTimeout != worker.HistoryTimeoutDefault ||
		c.AckWait != jetstream.AckWaitDefault {
		t.Errorf("defaults %+v", c)
	}
	if c.Logger != slog.Default() || c.Metrics == nil || c.WorkerID == "" {
		t.Errorf("logger %v, metrics %v, worker id %q; want slog.Default(), a no-op, a generated id", c.Logger, c.Metrics, c.WorkerID)
	}
	if got := (worker.Config{Concurrency: 3, WorkerID: "w"}).WithDefaults(); got.Concurrency != 3 || got.WorkerID != "w" {
		t.Errorf("set fields changed: %+v", got)
	}
}

// New refuses a bad config, naming the field.
func TestNewNamesTheBadField(t *testing.T) {
	t.Parallel()
	b := setup(t, tool("idle", func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text("ok"), nil }))
	for _, tc := range []struct {
		cfg  worker.Config
		want string
	}{
		{worker.Config{Registry: b.reg}, "Config.JetStream"},
		{worker.Config{JetStream: b.js}, "Config.Registry"},
		{worker.Config{JetStream: b.js, Registry: b.reg, Concurrency: -1}, "Config.Concurrency must be at least 1"},
		{worker.Config{JetStream: b.js, Registry: b.reg, DrainTimeout: -1}, "Config.DrainTimeout"},
		{worker.Config{JetStream: b.js, Registry: b.reg, Tools: []string{"nope"}}, "Config.Tools"},
	} {
		if _, err := worker.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) error %v; want one naming %s", tc.cfg, err, tc.want)
		}
	}
}
