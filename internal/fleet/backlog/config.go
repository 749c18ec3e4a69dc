package backlog

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/orchestrator/sched"
)

// Names and defaults.
const (
	// StreamDefault is the history's stream.
	StreamDefault = "TOOLPOOL_HISTORY"
	// SubjectDefault is the subject of its samples.
	SubjectDefault = "toolpool.history.sample"
	// KeepDefault is how long the stream keeps a sample: the hour the
	// console draws, and a margin.
	KeepDefault = 65 * time.Minute
	// BacklogAgeDefault is the age of the oldest queued call past which a
	// tool is backing up (`orchestrator serve --backlog-age`).
	BacklogAgeDefault = 30 * time.Second
	// StallAfterDefault is how long calls may stay queued with nothing
	// delivered or answered before the tool is stalled.
	StallAfterDefault = time.Minute
	// DrainWindowDefault is the span the drain estimate's rate is
	// measured over.
	DrainWindowDefault = time.Minute
	// FreshDefault is how long Backlog reuses a reading: the console's
	// pages and the metrics' scrapes cost one read per FreshDefault.
	FreshDefault = time.Second
	// historyMaxBytes bounds the stream: about 390 samples of 200 tools.
	historyMaxBytes = 64 << 20
)

// Config configures a Monitor. Zero fields take the documented defaults
// (WithDefaults); Validate names the field that is wrong.
type Config struct {
	// JetStream is the orchestrator's. Required.
	JetStream js.JetStream
	// Live tells which workers serve a tool (the live catalog). Nil: a
	// tool without workers cannot be told apart, Workers is -1.
	Live ops.WorkerSource
	// Snapshot returns the schedulers' state (the calls waiting per
	// tool), summed over the replicas. Nil: Waiting is 0.
	Snapshot func() sched.Snapshot
	// Instance names this orchestrator in the samples it writes.
	Instance string
	// BacklogAge is the oldest queued call's age past which a tool is
	// backing up. Default BacklogAgeDefault.
	BacklogAge time.Duration
	// StallAfter is how long calls may stay queued with nothing delivered
	// or answered before the tool is stalled. Default StallAfterDefault.
	StallAfter time.Duration
	// DrainWindow is the span the drain estimate's rate is measured
	// over. Default DrainWindowDefault.
	DrainWindow time.Duration
	// SampleEvery is the history's slot. Default SampleEvery; at least a
	// second (tests shorten it).
	SampleEvery time.Duration
	// Keep is how long the stream keeps a sample (its MaxAge when the
	// monitor creates it). Default KeepDefault.
	Keep time.Duration
	// Replicas of the stream when the monitor creates it. Default 1.
	Replicas int
	// NoHistory reads the backlog without writing or watching samples.
	NoHistory bool
	// Logger receives what went wrong. Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.BacklogAge = cmp.Or(c.BacklogAge, BacklogAgeDefault)
	c.StallAfter = cmp.Or(c.StallAfter, StallAfterDefault)
	c.DrainWindow = cmp.Or(c.DrainWindow, DrainWindowDefault)
	c.SampleEvery = cmp.Or(c.SampleEvery, SampleEvery)
	c.Keep = cmp.Or(c.Keep, KeepDefault)
	c.Replicas = cmp.Or(c.Replicas, 1)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate reports the first field of c that is wrong, by name.
func (c Config) Validate() error {
	switch {
	case c.JetStream == nil:
		return errors.New("backlog: Config.JetStream is required")
	case c.BacklogAge < 0:
		return fmt.Errorf("backlog: Config.BacklogAge must not be negative, got %v", c.BacklogAge)
	case c.StallAfter < 0:
		return fmt.Errorf("backlog: Config.StallAfter must not be negative, got %v", c.StallAfter)
	case c.DrainWindow < 0:
		return fmt.Errorf("backlog: Config.DrainWindow must not be negative, got %v", c.DrainWindow)
	case c.SampleEvery < time.Second || c.SampleEvery%time.Second != 0:
		return fmt.Errorf("backlog: Config.SampleEvery must be whole seconds, at least 1s, got %v", c.SampleEvery)
	case c.Keep < 2*c.SampleEvery:
		return fmt.Errorf("backlog: Config.Keep must be at least two samples (%v), got %v", 2*c.SampleEvery, c.Keep)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("backlog: Config.Replicas must be 1 to 5, got %d", c.Replicas)
	}
	return nil
}
