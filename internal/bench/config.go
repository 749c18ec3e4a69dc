package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"github.com/toolpool/toolpool/internal/infra/tracing"
)

// Defaults of Config.
const (
	// CallsDefault is the number of calls measured when neither Calls nor
	// Duration is set.
	CallsDefault = 50_000
	// ConcurrencyDefault is the number of simulated agents.
	ConcurrencyDefault = 256
	// WorkerConcurrencyDefault is how many calls each in-process worker
	// executes at once (the worker's own default).
	WorkerConcurrencyDefault = 256
	// PayloadDefault is the size of an echo call's input JSON, in bytes.
	PayloadDefault = 256
	// SleepDefault is how long a sleep call sleeps.
	SleepDefault = 10 * time.Millisecond
	// TransientBaseDelayDefault is the flaky tool's retry base delay in the
	// bench: a transient failure is retried after about this long (±25%),
	// so failures do not stall the run as the production default (1s)
	// would.
	TransientBaseDelayDefault = 50 * time.Millisecond
	// TurnTimeoutDefault bounds the wait for one turn's results.
	TurnTimeoutDefault = 30 * time.Second
)

// The tools a bench can load.
const (
	ToolEcho  = "echo"
	ToolSleep = "sleep"
)

// FailMix is the share of calls that go to the flaky tool to fail: a
// transient call fails its first attempt with HTTP 503 and succeeds when
// retried; a permanent call fails with HTTP 404 and is not retried.
type FailMix struct {
	Transient float64 // 0..1
	Permanent float64 // 0..1
}

// Zero reports whether no call fails.
func (m FailMix) Zero() bool { return m.Transient == 0 && m.Permanent == 0 }

// String is the mix in ParseFailMix's format, "" when no call fails.
func (m FailMix) String() string {
	var parts []string
	if m.Transient > 0 {
		parts = append(parts, "transient="+strconv.FormatFloat(m.Transient, 'g', -1, 64))
	}
	if m.Permanent > 0 {
		parts = append(parts, "permanent="+strconv.FormatFloat(m.Permanent, 'g', -1, 64))
	}
	return strings.Join(parts, ",")
}

// ParseFailMix parses "transient=0.2,permanent=0.05" (either part may be
// left out; "" is no failures).
func ParseFailMix(s string) (FailMix, error) {
	var m FailMix
	if strings.TrimSpace(s) == "" {
		return m, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return m, fmt.Errorf("%q: want transient=FRACTION or permanent=FRACTION, e.g. transient=0.2,permanent=0.05", part)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
			return m, fmt.Errorf("%q: the fraction must be a number from 0 to 1", part)
		}
		switch strings.TrimSpace(k) {
		case "transient":
			m.Transient = f
		case "permanent":
			m.Permanent = f
		default:
			return m, fmt.Errorf("%q: unknown failure kind %q; want transient or permanent", part, k)
		}
	}
	if m.Transient+m.Permanent > 1 {
		return m, fmt.Errorf("transient (%v) and permanent (%v) add up to more than 1", m.Transient, m.Permanent)
	}
	return m, nil
}

// Config configures a bench run. Zero fields take the documented defaults.
type Config struct {
	// NATSURL is the server to load. Default "": an embedded server with
	// file storage in a temporary directory, on a random loopback port.
	NATSURL string
	// Connect opens a connection to url, named name. Default: nats.Connect
	// with unlimited reconnects. The CLI passes one that applies its
	// credential flags.
	Connect func(url, name string) (*nats.Conn, error)
	// Storage of the embedded server's streams (and the baseline's).
	// Default file storage.
	Storage js.StorageType
	// Workers is the number of in-process pool workers. Default 1.
	Workers int
	// ExternalWorkers, with NATSURL set, leaves the pool's tools to
	// worker processes started separately: no in-process pool worker
	// runs (the baseline still runs its own workers in-process, Workers
	// of them, default 1).
	ExternalWorkers bool
	// WorkerConcurrency is each worker's Concurrency, and the number of
	// goroutines executing calls in the baseline (times Workers). Default
	// WorkerConcurrencyDefault.
	WorkerConcurrency int
	// Calls is the number of calls measured per phase. Default
	// CallsDefault when Duration is zero too; rounded up to a multiple of
	// Batch.
	Calls int
	// Duration, when set (and Calls is not), measures each phase for this
	// long.
	Duration time.Duration
	// Warmup is the number of calls run before each phase's measurement
	// and not counted. Default Calls/20 between 200 and 2000 (1000 with
	// Duration); negative for none.
	Warmup int
	// Concurrency is the number of simulated agents. Each runs one turn
	// at a time and waits for all its results, as an agent does. In an
	// open-loop run (Rate set) it caps the turns in flight. Default
	// ConcurrencyDefault.
	Concurrency int
	// Rate, when positive, offers this many calls per second at a steady
	// pace whatever the latency (open loop); latency is measured from
	// when each turn was due. Default 0: closed loop, agents start their
	// next turn as soon as the last one ends.
	Rate float64
	// Batch is the number of tool calls per assistant turn. Default 1.
	Batch int
	// Tool is the tool loaded: ToolEcho (default) or ToolSleep.
	Tool string
	// Sleep is how long each sleep call sleeps. Default SleepDefault.
	Sleep time.Duration
	// Payload is the size of an echo call's input JSON in bytes. Default
	// PayloadDefault. Sleep and flaky inputs are small and fixed.
	Payload int
	// Fail sends these shares of the calls to the flaky tool to fail.
	Fail FailMix
	// TransientBaseDelay is the flaky tool's retry base delay. Default
	// TransientBaseDelayDefault.
	TransientBaseDelay time.Duration
	// SkipBaseline skips the raw-JetStream baseline.
	SkipBaseline bool
	// Rounds repeats the phases (baseline, then pool) this many times and
	// reports medians. Default 1.
	Rounds int
	// TurnTimeout bounds the wait for a turn's results. Default
	// TurnTimeoutDefault.
	TurnTimeout time.Duration
	// CPUProfile, when set, receives a CPU profile of the first round's
	// measured pool phase.
	CPUProfile io.Writer
	// FrontCPUProfiles, by front door (FrontHTTP, FrontMCP, FrontMCPSDK), receive a
	// CPU profile of the first round's measured phase of that front.
	FrontCPUProfiles map[string]io.Writer
	// BaselineCPUProfile, when set, receives a CPU profile of the first
	// round's measured baseline phase.
	BaselineCPUProfile io.Writer
	// MemProfile, when set, receives the process's allocation profile
	// (pprof "allocs": everything allocated since the process started)
	// after the last phase.
	MemProfile io.Writer
	// Progress, when set, receives a progress bar (a terminal).
	Progress io.Writer
	// Logger receives the pool's and the embedded server's logs. Default:
	// discarded.
	Logger *slog.Logger
	// Tracer, when on, records the pool phase's spans (the dispatcher's,
	// the gate's and the workers'), to measure what tracing costs; the raw
	// baseline has none. Default nil: off.
	Tracer *tracing.Tracer
	// Fronts are the front doors measured after direct dispatch (which is
	// always measured): FrontHTTP (the HTTP API through pkg/client),
	// FrontMCP (a host's JSON-RPC requests on /mcp, written by hand) and
	// FrontMCPSDK (the go-sdk MCP client over streamable HTTP on /mcp),
	// each a phase of its own against the same pool, in the same round.
	// Default none.
	Fronts []string
	// OnPhase, when set, is told of each phase's events (PhaseEvent), in
	// the bench's goroutine, so that a program running the bench against
	// a server of its own can act between phases (empty the pool's
	// streams, which the bench leaves alone on a server given with
	// NATSURL) and measure what the bench cannot see (the CPU time of
	// the server and worker processes over the measured load). An error
	// ends the run with it.
	OnPhase func(ctx context.Context, ev PhaseEvent, name string, round int) error
}

// PhaseEvent is a moment of a phase that Config.OnPhase is told of.
type PhaseEvent int

// The events of a phase, in order.
const (
	// PhaseStarting: before the phase's system (the baseline's streams
	// and executors, or a pool) is started.
	PhaseStarting PhaseEvent = iota
	// PhaseMeasuring: the warm-up is over, the measured load begins.
	PhaseMeasuring
	// PhaseMeasured: the measured load has ended.
	PhaseMeasured
)

// onPhase tells cfg.OnPhase of ev, if set.
func (c Config) onPhase(ctx context.Context, ev PhaseEvent, name string, round int) error {
	if c.OnPhase == nil {
		return nil
	}
	return c.OnPhase(ctx, ev, name, round)
}

// The front doors of Config.Fronts.
const (
	FrontDirect = "direct"  // Orchestrator.Dispatch in the process: the pool phase
	FrontHTTP   = "http"    // POST /v1/tool_calls through pkg/client
	FrontMCP    = "mcp"     // tools/call on /mcp from the lean load generator: a host's requests, no MCP client library
	FrontMCPSDK = "mcp-sdk" // tools/call through the go-sdk client over streamable HTTP
)

// ParseFronts reads --front: a comma-separated list of direct, http, mcp
// and mcp-sdk. Direct is always measured, so it is dropped from the list.
func ParseFronts(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		switch f = strings.TrimSpace(strings.ToLower(f)); f {
		case "", FrontDirect:
		case FrontHTTP, FrontMCP, FrontMCPSDK:
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		default:
			return nil, fmt.Errorf("%q: want direct, http, mcp or mcp-sdk (comma-separated)", f)
		}
	}
	return out, nil
}

func (c Config) withDefaults() Config {
	if c.Calls == 0 && c.Duration == 0 {
		c.Calls = CallsDefault
	}
	c.Batch = cmp.Or(c.Batch, 1)
	if c.Calls > 0 && c.Calls%c.Batch != 0 {
		c.Calls += c.Batch - c.Calls%c.Batch
	}
	c.Workers = cmp.Or(c.Workers, 1)
	c.WorkerConcurrency = cmp.Or(c.WorkerConcurrency, WorkerConcurrencyDefault)
	if c.Warmup == 0 {
		if c.Calls > 0 {
			c.Warmup = min(max(c.Calls/20, 200), 2000)
		} else {
			c.Warmup = 1000
		}
	}
	c.Concurrency = cmp.Or(c.Concurrency, ConcurrencyDefault)
	c.Tool = cmp.Or(c.Tool, ToolEcho)
	c.Sleep = cmp.Or(c.Sleep, SleepDefault)
	c.Payload = cmp.Or(c.Payload, PayloadDefault)
	c.TransientBaseDelay = cmp.Or(c.TransientBaseDelay, TransientBaseDelayDefault)
	c.Rounds = cmp.Or(c.Rounds, 1)
	c.TurnTimeout = cmp.Or(c.TurnTimeout, TurnTimeoutDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Connect == nil {
		c.Connect = func(url, name string) (*nats.Conn, error) {
			return nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1))
		}
	}
	return c
}

// minPayload is the smallest echo input: {"text":""}.
const minPayload = len(`{"text":""}`)

func (c Config) validate() error {
	switch {
	case c.Calls < 0:
		return fmt.Errorf("bench: calls must not be negative, got %d", c.Calls)
	case c.Duration < 0:
		return fmt.Errorf("bench: duration must not be negative, got %v", c.Duration)
	case c.Calls > 0 && c.Duration > 0:
		return errors.New("bench: give either the number of calls or a duration, not both")
	case c.Workers < 0:
		return fmt.Errorf("bench: workers must not be negative, got %d", c.Workers)
	case c.ExternalWorkers && c.NATSURL == "":
		return errors.New("bench: external workers need a server URL they are connected to")
	case c.WorkerConcurrency < 1:
		return fmt.Errorf("bench: worker concurrency must be at least 1, got %d", c.WorkerConcurrency)
	case c.Concurrency < 1:
		return fmt.Errorf("bench: concurrency must be at least 1, got %d", c.Concurrency)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("bench: rate must be a positive number of calls per second, got %v", c.Rate)
	case c.Batch < 1:
		return fmt.Errorf("bench: batch must be at least 1, got %d", c.Batch)
	case c.Tool != ToolEcho && c.Tool != ToolSleep:
		return fmt.Errorf("bench: tool %q: want %s or %s", c.Tool, ToolEcho, ToolSleep)
	case c.Sleep < 0:
		return fmt.Errorf("bench: sleep must not be negative, got %v", c.Sleep)
	case c.Payload < minPayload:
		return fmt.Errorf("bench: payload must be at least %d bytes (the smallest echo input), got %d", minPayload, c.Payload)
	case c.Fail.Transient < 0 || c.Fail.Permanent < 0 || c.Fail.Transient+c.Fail.Permanent > 1:
		return fmt.Errorf("bench: failure mix %s: the shares must be between 0 and 1 and add up to at most 1", c.Fail)
	case c.TransientBaseDelay < 0:
		return fmt.Errorf("bench: transient base delay must not be negative, got %v", c.TransientBaseDelay)
	case c.Rounds < 1:
		return fmt.Errorf("bench: rounds must be at least 1, got %d", c.Rounds)
	case c.TurnTimeout < 0:
		return fmt.Errorf("bench: turn timeout must not be negative, got %v", c.TurnTimeout)
	}
	return nil
}
