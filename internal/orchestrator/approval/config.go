package approval

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/pkg/tools"
)

// Defaults of Config.
const (
	// BucketDefault is the KV bucket of the approvals.
	BucketDefault = "toolpool_approvals"
	// RetentionDefault is how long a decided record is kept at least,
	// for audit.
	RetentionDefault = 7 * 24 * time.Hour
)

// sweepEvery is how often a started Store looks for pending records
// whose deadline passed, to write them timed_out.
const sweepEvery = time.Second

// Config configures a Store.
type Config struct {
	// JS is the JetStream context. Required.
	JS js.JetStream
	// Bucket is the KV bucket. Default BucketDefault.
	Bucket string
	// Retention is how long a record is kept at least after its last
	// write (its decision). Default RetentionDefault. The bucket's TTL is
	// Retention plus tools.ApprovalTimeoutMax, so that a pending record
	// never expires before its deadline; a bucket that exists keeps its
	// own.
	Retention time.Duration
	// ResultsMaxAge is how long an approval lets its call through again
	// after the call's first run was let through: the time TOOL_RESULTS
	// keeps the run's result, from which the dispatcher answers the call
	// sent again. After it, the approval is spent and the call is held
	// again. Zero (the default): the max age of the stream
	// jetstream.StreamResults, read when an approval's use is checked
	// (jetstream.ResultsMaxAgeDefault when there is no such stream).
	// Set, it is used as it is: for a Store without the pool's streams.
	ResultsMaxAge time.Duration
	// Storage and Replicas of the bucket, when Start creates it. Default
	// file storage, 1 replica.
	Storage  js.StorageType
	Replicas int
	// Logger receives the audit lines. nil means slog.Default().
	Logger *slog.Logger
	// Metrics counts held calls and decisions. nil: none.
	Metrics Metrics
	// Now is the clock. nil means time.Now.
	Now func() time.Time
}

// Metrics receives what a Store counts (infra/metrics' Approvals
// implements it).
type Metrics interface {
	// Held counts a call newly held for approval.
	Held()
	// Decided counts an approval this process decided or timed out:
	// "approved", "denied" or "timed_out" (a State).
	Decided(outcome string)
	// Pending is the number of pending approvals fleet-wide, as this
	// replica's watch of the bucket sees them.
	Pending(n int)
}

type noMetrics struct{}

func (noMetrics) Held()          {}
func (noMetrics) Decided(string) {}
func (noMetrics) Pending(int)    {}

// withDefaults returns c with the defaults applied.
func (c Config) withDefaults() Config {
	c.Bucket = cmp.Or(c.Bucket, BucketDefault)
	c.Retention = cmp.Or(c.Retention, RetentionDefault)
	c.Replicas = cmp.Or(c.Replicas, 1)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = noMetrics{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// validate names the first bad field.
func (c Config) validate() error {
	switch {
	case c.JS == nil:
		return errors.New("approval: Config.JS is required")
	case c.Retention < time.Minute:
		return fmt.Errorf("approval: Config.Retention is %v; want at least a minute", c.Retention)
	case c.ResultsMaxAge < 0:
		return fmt.Errorf("approval: Config.ResultsMaxAge is %v; want 0 (the stream's) or a positive duration", c.ResultsMaxAge)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("approval: Config.Replicas is %d; want 1 to 5", c.Replicas)
	}
	return nil
}

// bucketTTL is the bucket's TTL for a retention.
func bucketTTL(retention time.Duration) time.Duration {
	return retention + tools.ApprovalTimeoutMax
}
