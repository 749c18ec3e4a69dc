package tasks

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// Defaults of Config.
const (
	// BucketDefault is the KV bucket of the tasks.
	BucketDefault = "TOOLPOOL_TASKS"
	// RetentionDefault is how long a task's record is kept after it ended
	// (its last write): a day, against TOOL_RESULTS' hour, so that a client
	// that polls late still gets the answer.
	RetentionDefault = 24 * time.Hour
	// LeaseDefault is how long an owner's claim on a working task lasts
	// without a refresh; it refreshes every third of it. A task whose
	// owner died is adopted about this long after the owner's last
	// refresh.
	LeaseDefault = 15 * time.Second
	// PollIntervalDefault is the poll interval clients are told.
	PollIntervalDefault = time.Second
	// TimeoutDefault bounds a turn whose Request has no Timeout.
	TimeoutDefault = 60 * time.Second
	// MaxWaitDefault caps Wait.
	MaxWaitDefault = 60 * time.Second
)

// Config configures a Store.
type Config struct {
	// Dispatcher runs the turns. Required.
	Dispatcher Dispatcher
	// Instance names this replica in the records it owns (the
	// dispatcher's instance). Required.
	Instance string
	// Bucket is the KV bucket. Default BucketDefault.
	Bucket string
	// Retention is how long a record is kept after the task ended.
	// Default RetentionDefault. A bucket that exists keeps its own.
	Retention time.Duration
	// Lease is how long an owner's claim lasts unrefreshed. Default
	// LeaseDefault.
	Lease time.Duration
	// PollInterval is the hint given to clients. Default
	// PollIntervalDefault.
	PollInterval time.Duration
	// Timeout bounds a turn whose Request has none. Default
	// TimeoutDefault.
	Timeout time.Duration
	// MaxWait caps Wait's duration. Default MaxWaitDefault.
	MaxWait time.Duration
	// MaxRecordBytes caps a record. Default: the server's maximum
	// message size (1 MB unless configured), less room for headers.
	MaxRecordBytes int
	// Storage and Replicas of the bucket, when Open creates it.
	// Default file storage, 1 replica.
	Storage  js.StorageType
	Replicas int
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with the defaults applied.
func (c Config) WithDefaults() Config {
	c.Bucket = cmp.Or(c.Bucket, BucketDefault)
	c.Retention = cmp.Or(c.Retention, RetentionDefault)
	c.Lease = cmp.Or(c.Lease, LeaseDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.Timeout = cmp.Or(c.Timeout, TimeoutDefault)
	c.MaxWait = cmp.Or(c.MaxWait, MaxWaitDefault)
	c.Replicas = cmp.Or(c.Replicas, 1)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.Dispatcher == nil:
		return fmt.Errorf("tasks: Config.Dispatcher is required")
	case c.Instance == "":
		return fmt.Errorf("tasks: Config.Instance is required")
	case c.Retention < time.Minute:
		return fmt.Errorf("tasks: Config.Retention is %v; want at least a minute", c.Retention)
	case c.Lease < 100*time.Millisecond:
		return fmt.Errorf("tasks: Config.Lease is %v; want at least 100ms", c.Lease)
	case c.PollInterval < 0 || c.Timeout < 0 || c.MaxWait < 0 || c.MaxRecordBytes < 0:
		return fmt.Errorf("tasks: Config.PollInterval, Timeout, MaxWait and MaxRecordBytes must not be negative")
	}
	return nil
}
