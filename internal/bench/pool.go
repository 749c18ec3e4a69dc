package bench

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/dispatch"
	"github.com/toolpool/toolpool/pkg/dlq"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/metrics"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
	"github.com/toolpool/toolpool/pkg/worker"
)

// benchRegistry holds the demo tools as the bench serves them: flaky
// retries after TransientBaseDelay instead of the production second.
func benchRegistry(cfg Config) (*tools.Registry, error) {
	reg := tools.NewRegistry()
	flaky := demo.Flaky()
	flaky.Retry = classify.Policy{BaseDelay: cfg.TransientBaseDelay, MaxDelay: max(time.Second, cfg.TransientBaseDelay)}
	for _, t := range []tools.Tool{demo.Echo(), demo.Sleep(), flaky} {
		if err := reg.Register(t); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// callInputs are the inputs of the three kinds of call.
type callInputs struct {
	names  [3]string
	inputs [3]json.RawMessage
}

func newCallInputs(cfg Config) callInputs {
	var ci callInputs
	ci.names[kindTool] = cfg.Tool
	switch cfg.Tool {
	case ToolSleep:
		ci.inputs[kindTool] = json.RawMessage(`{"ms":` + strconv.FormatInt(cfg.Sleep.Milliseconds(), 10) + `}`)
	default:
		ci.inputs[kindTool] = echoInput(cfg.Payload)
	}
	ci.names[kindTransient] = "flaky"
	ci.inputs[kindTransient] = json.RawMessage(`{"fail":"503","times":1}`)
	ci.names[kindPermanent] = "flaky"
	ci.inputs[kindPermanent] = json.RawMessage(`{"fail":"404"}`)
	return ci
}

// echoInput is an echo input of exactly n bytes: {"text":"xxx…"}.
func echoInput(n int) json.RawMessage {
	b := make([]byte, 0, n)
	b = append(b, `{"text":"`...)
	for len(b) < n-2 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}

// poolTarget runs turns through a dispatcher.
type poolTarget struct {
	d      *dispatch.Dispatcher
	inputs callInputs
}

func (p *poolTarget) turn(ctx context.Context, a *agent, seq uint64, k int) {
	blocks := a.blocks[:0]
	for i := range k {
		kind := a.pick()
		blocks = append(blocks, envelope.ToolUseBlock{
			Type:  "tool_use",
			ID:    a.prefix + strconv.FormatUint(seq+uint64(i), 10),
			Name:  p.inputs.names[kind],
			Input: p.inputs.inputs[kind],
		})
	}
	a.blocks = blocks
	results, err := p.d.Dispatch(ctx, a.session, blocks)
	if err != nil {
		a.calls += uint64(k)
		class := "unavailable"
		if ctx.Err() != nil {
			class = "cancelled"
		}
		a.fail(class, k)
		return
	}
	for i := range results {
		r := &results[i]
		a.calls++
		a.attempts += uint64(r.Attempts)
		if r.IsError {
			a.fail(string(r.Class), 1)
		}
	}
}

// pool is a running pool: in-process workers (unless external) and a
// dispatcher, each side on its own connection, with their Prometheus
// metrics as the orchestrator has them.
type pool struct {
	target  *poolTarget
	workers []*worker.Worker
	conns   []*nats.Conn
}

// startPool starts the workers and the dispatcher.
func startPool(ctx context.Context, cfg Config, url string, reg *tools.Registry) (_ *pool, err error) {
	p := &pool{}
	promReg := metrics.NewRegistry()
	defer func() {
		if err != nil {
			p.stop()
		}
	}()
	connect := func(name string) (js.JetStream, error) {
		nc, err := cfg.Connect(url, name)
		if err != nil {
			return nil, err
		}
		p.conns = append(p.conns, nc)
		return js.New(nc, js.WithPublishAsyncTimeout(dispatch.PublishAsyncTimeout)) // as serve has it
	}
	var catalog dispatch.Catalog
	if cfg.ExternalWorkers {
		names := []string{cfg.Tool}
		if !cfg.Fail.Zero() {
			names = append(names, "flaky")
		}
		catalog = dispatch.StaticCatalog(names...)
	} else {
		wj, err := connect("toolpool-bench-worker")
		if err != nil {
			return nil, err
		}
		// As the orchestrator does: failed attempts are recorded so dead
		// letters carry them all (best effort).
		var history worker.History
		if h, err := dlq.OpenHistory(ctx, wj, dlq.HistoryConfig{}); err == nil {
			history = h
		} else {
			cfg.Logger.Warn("bench: no attempt history", "err", err)
		}
		wm, err := metrics.NewWorker(promReg, metrics.WorkerOptions{Tools: reg.Names()})
		if err != nil {
			return nil, err
		}
		for i := range cfg.Workers {
			w, err := worker.New(worker.Config{
				JetStream: wj, Registry: reg, Concurrency: cfg.WorkerConcurrency,
				Logger: cfg.Logger.With("worker", i), Metrics: wm, History: history,
			})
			if err != nil {
				return nil, err
			}
			if err := w.Start(ctx); err != nil {
				return nil, err
			}
			p.workers = append(p.workers, w)
		}
		catalog = dispatch.RegistryCatalog(reg)
	}
	oj, err := connect("toolpool-bench-orchestrator")
	if err != nil {
		return nil, err
	}
	dm, err := metrics.NewDispatch(promReg, metrics.DispatchOptions{})
	if err != nil {
		return nil, err
	}
	d, err := dispatch.New(dispatch.Config{
		JS: oj, Instance: "bench-" + nuidShort(), Catalog: catalog,
		DefaultTimeout: cfg.TurnTimeout, Logger: cfg.Logger, Metrics: dm,
	})
	if err != nil {
		return nil, err
	}
	if err := d.Start(ctx); err != nil {
		return nil, err
	}
	p.target = &poolTarget{d: d, inputs: newCallInputs(cfg)}
	return p, nil
}

func (p *pool) stop() {
	if p.target != nil {
		p.target.d.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, w := range p.workers {
		_ = w.Stop(ctx) // calls still running are handed back; the phase is over
	}
	for _, nc := range p.conns {
		nc.Close()
	}
}
