package bench

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// The scenarios of `orchestrator bench --scenario`.
const (
	// ScenarioThroughput is Run: the pool against a raw-JetStream
	// baseline (the default).
	ScenarioThroughput = "throughput"
	// ScenarioNoisyNeighbour is RunNoisyNeighbour: fair shares, per-key
	// limits and the cost of the scheduler (issue 15).
	ScenarioNoisyNeighbour = "noisy-neighbour"
)

// Defaults of NoisyConfig.
const (
	NoisyWorkersDefault           = 2
	NoisyWorkerConcurrencyDefault = 32 // 2 × 32 = 64 slots fleet-wide
	NoisySleepDefault             = 20 * time.Millisecond
	NoisyBacklogDefault           = 20_000
	NoisyIntervalDefault          = 100 * time.Millisecond
	NoisyCallsDefault             = 50_000
	NoisyConcurrencyDefault       = 256
	NoisyCapDefault               = 8
	NoisyCapCallsDefault          = 1_000
	NoisyRateDefault              = 50
	NoisyOfferedDefault           = 200
	NoisyRateForDefault           = 5 * time.Second
	NoisyTimeoutDefault           = 60 * time.Second
)

// NoisyConfig configures RunNoisyNeighbour. Zero fields take the
// documented defaults. The scenario runs on an embedded server of its own,
// with in-process workers assembled by the root package.
type NoisyConfig struct {
	// Storage of the embedded server's streams. Default file storage.
	Storage js.StorageType
	// Workers and WorkerConcurrency make the fleet: Workers in-process
	// workers of WorkerConcurrency slots each; the tool's Concurrency
	// (MaxAckPending) is their product, and so is the Slots the
	// dispatcher's catalog reports. Defaults NoisyWorkersDefault and
	// NoisyWorkerConcurrencyDefault (64 slots).
	Workers, WorkerConcurrency int
	// Sleep is how long each call of the tool takes. Default
	// NoisySleepDefault.
	Sleep time.Duration
	// Backlog is how many calls tenant A queues at once. Default
	// NoisyBacklogDefault.
	Backlog int
	// BacklogTurn is how many of A's calls each of its turns carries (one
	// Dispatch each): 1 (the default) is Backlog agents posting one call
	// each, so the load generator runs Backlog goroutines at once; 20 is
	// Backlog/20 agents whose turns fan out 20 parallel calls.
	BacklogTurn int
	// Interval is tenant B's pace: one call each Interval while A's
	// backlog drains. Default NoisyIntervalDefault.
	Interval time.Duration
	// Calls is the number of calls of each of the single-tenant phases
	// (fairness off, fairness on). Default NoisyCallsDefault.
	Calls int
	// Concurrency is the agents of the single-tenant phases, each running
	// one call at a time. Default NoisyConcurrencyDefault.
	Concurrency int
	// Cap is the per-key concurrency cap of the cap phase, where tenants A
	// and C queue CapCalls calls each. Defaults NoisyCapDefault and
	// NoisyCapCallsDefault.
	Cap, CapCalls int
	// Rate is the per-key rate limit (calls per second) of the rate phase,
	// where tenant A offers Offered calls per second for RateFor; the
	// calls still waiting then are cancelled. Defaults NoisyRateDefault,
	// NoisyOfferedDefault, NoisyRateForDefault.
	Rate    int
	Offered float64
	RateFor time.Duration
	// Timeout is the deadline of every other call. Default
	// NoisyTimeoutDefault.
	Timeout time.Duration
	// Progress, when set, receives a progress bar (a terminal).
	Progress io.Writer
	// Logger receives the pool's and the embedded server's logs. Default:
	// discarded.
	Logger *slog.Logger
}

func (c NoisyConfig) withDefaults() NoisyConfig {
	c.Workers = cmp.Or(c.Workers, NoisyWorkersDefault)
	c.WorkerConcurrency = cmp.Or(c.WorkerConcurrency, NoisyWorkerConcurrencyDefault)
	c.Sleep = cmp.Or(c.Sleep, NoisySleepDefault)
	c.Backlog = cmp.Or(c.Backlog, NoisyBacklogDefault)
	c.BacklogTurn = cmp.Or(c.BacklogTurn, 1)
	c.Interval = cmp.Or(c.Interval, NoisyIntervalDefault)
	c.Calls = cmp.Or(c.Calls, NoisyCallsDefault)
	c.Concurrency = cmp.Or(c.Concurrency, NoisyConcurrencyDefault)
	c.Cap = cmp.Or(c.Cap, NoisyCapDefault)
	c.CapCalls = cmp.Or(c.CapCalls, NoisyCapCallsDefault)
	c.Rate = cmp.Or(c.Rate, NoisyRateDefault)
	c.Offered = cmp.Or(c.Offered, NoisyOfferedDefault)
	c.RateFor = cmp.Or(c.RateFor, NoisyRateForDefault)
	c.Timeout = cmp.Or(c.Timeout, NoisyTimeoutDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c NoisyConfig) validate() error {
	switch {
	case c.Workers < 1:
		return fmt.Errorf("bench: workers must be at least 1, got %d", c.Workers)
	case c.WorkerConcurrency < 1:
		return fmt.Errorf("bench: worker concurrency must be at least 1, got %d", c.WorkerConcurrency)
	case c.Sleep < 0:
		return fmt.Errorf("bench: sleep must not be negative, got %v", c.Sleep)
	case c.Backlog < 1:
		return fmt.Errorf("bench: backlog must be at least 1, got %d", c.Backlog)
	case c.BacklogTurn < 1 || c.BacklogTurn > c.Backlog:
		return fmt.Errorf("bench: backlog turn must be from 1 to the backlog (%d), got %d", c.Backlog, c.BacklogTurn)
	case c.Interval <= 0:
		return fmt.Errorf("bench: interval must be positive, got %v", c.Interval)
	case c.Calls < 1 || c.Concurrency < 1 || c.Cap < 1 || c.CapCalls < 1 || c.Rate < 1:
		return errors.New("bench: calls, concurrency, cap, cap calls and rate must be at least 1")
	case c.Offered <= 0 || c.RateFor <= time.Second || c.Timeout <= 0:
		return errors.New("bench: offered rate, deadlines and timeout must be positive, and the rate phase longer than 1s")
	}
	return nil
}
