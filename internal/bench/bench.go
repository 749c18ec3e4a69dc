package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

func nuidShort() string { return nuid.Next()[12:] }

// Run runs the bench: per round the raw-JetStream baseline, then (with
// failures) the pool without failures, then the pool, each warmed up and
// then measured under the same load.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	url, server := cfg.NATSURL, "external"
	if url == "" {
		var stop func()
		var err error
		if url, stop, err = startEmbedded(cfg.Logger); err != nil {
			return nil, err
		}
		defer stop()
		server = "embedded"
	}
	nc, err := cfg.Connect(url, "toolpool-bench")
	if err != nil {
		return nil, fmt.Errorf("bench: connect: %w", err)
	}
	defer nc.Close()
	r, err := newRunner(ctx, cfg, url, nc, server == "embedded")
	if err != nil {
		return nil, err
	}
	rep := &Report{Machine: machine(), Settings: r.settings(server)}
	if err := r.rounds(ctx, rep); err != nil {
		return nil, err
	}
	rep.summarise()
	rep.PeakRSSBytes = max(r.peakRSS, PeakRSS())
	if cfg.MemProfile != nil {
		if err := pprof.Lookup("allocs").WriteTo(cfg.MemProfile, 0); err != nil {
			return nil, fmt.Errorf("bench: memory profile: %w", err)
		}
	}
	return rep, nil
}

// startEmbedded starts the bench's own embedded server, with file storage
// in a temporary directory, on a random loopback port; stop shuts it down
// and removes the directory.
func startEmbedded(log *slog.Logger) (url string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "toolpool-bench-")
	if err != nil {
		return "", nil, err
	}
	emb, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:0", DataDir: dir, Logger: log})
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	return emb.ClientURL(), func() {
		emb.Shutdown()
		_ = os.RemoveAll(dir)
	}, nil
}

// newRunner prepares the phases on the server at url, nc the setup
// connection to it: the pool's streams, the tools, the calls' inputs, the
// message sizes and the baseline's configuration.
func newRunner(ctx context.Context, cfg Config, url string, nc *nats.Conn, embedded bool) (*runner, error) {
	j, err := js.New(nc)
	if err != nil {
		return nil, err
	}
	callsCfg, resultsCfg, err := poolStreams(ctx, j, cfg, embedded)
	if err != nil {
		return nil, err
	}
	reg, err := benchRegistry(cfg)
	if err != nil {
		return nil, err
	}
	r := &runner{
		cfg: cfg, url: url, js: j, embedded: embedded, storage: callsCfg.Storage,
		reg: reg, runID: nuidShort(), progress: newProgress(cfg.Progress),
	}
	r.inputs = newCallInputs(cfg)
	r.callBytes, r.resultBytes, err = messageSizes(cfg, r.inputs)
	if err != nil {
		return nil, err
	}
	r.raw = r.rawConfig(callsCfg, resultsCfg)
	return r, nil
}

// settings echo the run's configuration, on server ("embedded" or
// "external").
func (r *runner) settings(server string) Settings {
	cfg := r.cfg
	s := Settings{
		Server: server, Storage: strings.ToLower(r.storage.String()),
		Workers: cfg.Workers, WorkerConcurrency: cfg.WorkerConcurrency,
		Calls: cfg.Calls, DurationSeconds: cfg.Duration.Seconds(), Warmup: max(cfg.Warmup, 0),
		Concurrency: cfg.Concurrency, Rate: cfg.Rate, Batch: cfg.Batch, Tool: cfg.Tool,
		Payload: cfg.Payload, CallBytes: r.callBytes, ResultBytes: r.resultBytes,
		Fail: cfg.Fail.String(), Rounds: cfg.Rounds, Fronts: cfg.Fronts,
	}
	if cfg.ExternalWorkers {
		s.Workers = 0
	}
	if cfg.Tool == ToolSleep {
		s.SleepMillis = ms(cfg.Sleep)
	}
	return s
}

// rounds runs every round's phases and appends them to rep.Runs: the
// baseline (unless skipped), the pool without failures (when failures are
// injected), the pool, and the pool through each front door.
func (r *runner) rounds(ctx context.Context, rep *Report) error {
	for round := 1; round <= r.cfg.Rounds; round++ {
		var names []string
		if !r.cfg.SkipBaseline {
			names = append(names, PhaseBaseline)
		}
		if !r.cfg.Fail.Zero() {
			names = append(names, PhasePoolNoFailures)
		}
		names = append(names, PhasePool)
		for _, front := range r.cfg.Fronts {
			names = append(names, frontPhase(front))
		}
		for _, name := range names {
			p, err := r.phase(ctx, name, round)
			if err != nil {
				return err
			}
			rep.Runs = append(rep.Runs, p)
		}
	}
	return nil
}

// poolStreams makes sure the pool's streams exist (provisioning them on
// the embedded server, or on a server that lacks them) and returns the
// configurations of TOOL_CALLS and TOOL_RESULTS as the server has them.
func poolStreams(ctx context.Context, j js.JetStream, cfg Config, embedded bool) (calls, results js.StreamConfig, err error) {
	_, err = j.Stream(ctx, jetstream.StreamCalls)
	if embedded || errors.Is(err, js.ErrStreamNotFound) {
		err = jetstream.Provision(ctx, j, jetstream.Config{Storage: cfg.Storage})
	}
	if err != nil {
		return calls, results, fmt.Errorf("bench: streams: %w", err)
	}
	for _, x := range []struct {
		name string
		out  *js.StreamConfig
	}{{jetstream.StreamCalls, &calls}, {jetstream.StreamResults, &results}} {
		s, err := j.Stream(ctx, x.name)
		if err != nil {
			return calls, results, fmt.Errorf("bench: stream %s: %w", x.name, err)
		}
		*x.out = s.CachedInfo().Config
	}
	return calls, results, nil
}

// messageSizes encodes a typical call and result of the loaded tool, as
// the dispatcher and the worker do, for the baseline to send as much.
func messageSizes(cfg Config, in callInputs) (call, result int, err error) {
	now := time.Now()
	id := "toolu_" + nuidShort() + "_" + strconv.Itoa(cfg.Calls/2+100000) + "_"
	c, err := envelope.EncodeCall(&envelope.Call{
		ID: id, Tool: cfg.Tool, Input: in.inputs[kindTool], Session: "bench-agent-" + strconv.Itoa(cfg.Concurrency/2),
		ReplyTo: "bench-" + nuidShort(), CreatedAt: now, Deadline: now.Add(cfg.TurnTimeout),
		Traceparent: dispatch.NewTraceparent(),
	})
	if err != nil {
		return 0, 0, err
	}
	text := "slept " + strconv.FormatInt(cfg.Sleep.Milliseconds(), 10) + " ms"
	if cfg.Tool == ToolEcho {
		text = strings.Repeat("x", cfg.Payload-minPayload)
	}
	host, _ := os.Hostname()
	res, err := envelope.EncodeResult(&envelope.Result{
		CallID: id, Tool: cfg.Tool, Content: envelope.Text(text), Attempts: 1,
		WorkerID:  host + "-" + strconv.Itoa(os.Getpid()) + "-" + nuidShort()[:6],
		QueueWait: 1234567 * time.Nanosecond, ExecTime: 12345 * time.Nanosecond,
	})
	if err != nil {
		return 0, 0, err
	}
	return len(c), len(res), nil
}
