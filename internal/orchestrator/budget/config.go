package budget

import (
	"cmp"
	"errors"
	"log/slog"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// Defaults of Config.
const (
	// BucketDefault is the KV bucket of the definitions.
	BucketDefault = "toolpool_budgets"
	// StreamDefault is the counter stream of the spending.
	StreamDefault = "TOOLPOOL_SPEND"
	// spendMaxAge is how long a counter is kept after its last change:
	// longer than a month and than the longest rolling window.
	spendMaxAge = MaxWindow + 2*24*time.Hour
)

// Config configures a Store.
type Config struct {
	// JS is the JetStream context. Required.
	JS js.JetStream
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Metrics receives the spending and the refusals; nil: none.
	Metrics Metrics
	// Now is the clock; nil means time.Now. Periods follow it.
	Now func() time.Time
	// Replicas of the bucket and the stream, when Start creates them.
	// Default 1.
	Replicas int
}

// WithDefaults returns c with the defaults applied.
func (c Config) WithDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = nopMetrics{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Replicas = cmp.Or(c.Replicas, 1)
	return c
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.JS == nil:
		return errors.New("budget: Config.JS is required")
	case c.Replicas < 1 || c.Replicas > 5:
		return errors.New("budget: Config.Replicas must be from 1 to 5")
	}
	return nil
}

// Metrics receives what the budgets do, for Prometheus (implemented in
// internal/infra/metrics). Budget names are operator-defined: an
// implementation caps its label set.
type Metrics interface {
	// Spent reports a budget's spending in its current period, fleet-wide,
	// as this replica last saw it, and its limit.
	Spent(budget string, spent, limit int64)
	// Refused counts a call the budget refused.
	Refused(budget string)
}

// nopMetrics is the Metrics of a Config without.
type nopMetrics struct{}

func (nopMetrics) Spent(string, int64, int64) {}
func (nopMetrics) Refused(string)             {}
