package bench

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/orchhost"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/internal/worker/host"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
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
	// d is the orchestrator host, whose Dispatch passes the policy gate
	// as every front door's does (or a dispatcher, for the noisy phases).
	d      policy.Dispatcher
	inputs callInputs
}

// blocks are the k calls of a's turn numbered seq on: the loaded tool,
// or flaky as a's failure mix picks. They live in a's scratch.
func (in *callInputs) blocks(a *agent, seq uint64, k int) []envelope.ToolUseBlock {
	blocks := a.blocks[:0]
	for i := range k {
		kind := a.pick()
		blocks = append(blocks, envelope.ToolUseBlock{
			Type:  "tool_use",
			ID:    a.prefix + strconv.FormatUint(seq+uint64(i), 10),
			Name:  in.names[kind],
			Input: in.inputs[kind],
		})
	}
	a.blocks = blocks
	return blocks
}

func (p *poolTarget) turn(ctx context.Context, a *agent, seq uint64, k int) {
	results, err := p.d.Dispatch(ctx, a.session, p.inputs.blocks(a, seq, k))
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

// pool is a running pool assembled as the orchestrator assembles it (the
// hosts package toolpool wraps): a worker host of in-process workers
// (unless external) and an orchestrator host, each on its own connection,
// their Prometheus metrics in one registry.
type pool struct {
	target *poolTarget
	server *host.Host
	orch   *orchhost.Host
	conns  []*nats.Conn
}

// poolOptions change how startPool assembles a pool.
type poolOptions struct {
	// catalog replaces the dispatcher's catalog (default: the registry's,
	// or the static list of the loaded tools with external workers).
	catalog dispatch.Catalog
	// dispatch, when set, changes the dispatcher's configuration.
	dispatch func(*dispatch.Config)
}

// startPool starts the workers and the dispatcher.
func startPool(ctx context.Context, cfg Config, url string, reg *tools.Registry, opt poolOptions) (_ *pool, err error) {
	p := &pool{}
	promReg := metrics.NewRegistry()
	defer func() {
		if err != nil {
			p.stop()
		}
	}()
	connect := func(name string) (*nats.Conn, error) {
		nc, err := cfg.Connect(url, name)
		if err != nil {
			return nil, err
		}
		p.conns = append(p.conns, nc)
		return nc, nil
	}
	var catalog dispatch.Catalog
	if cfg.ExternalWorkers {
		names := []string{cfg.Tool}
		if !cfg.Fail.Zero() {
			names = append(names, "flaky")
		}
		catalog = discovery.StaticCatalog(names...)
	} else {
		wnc, err := connect("toolpool-bench-worker")
		if err != nil {
			return nil, err
		}
		// The bench's catalog is the registry: no announcements.
		p.server, err = host.New(host.Config{
			Conn: wnc, Registry: reg, Workers: cfg.Workers, NoAnnounce: true,
			Worker:  worker.Config{Concurrency: cfg.WorkerConcurrency, Tracer: cfg.Tracer},
			Metrics: promReg, Logger: cfg.Logger,
		})
		if err != nil {
			return nil, err
		}
		if err := p.server.Start(ctx); err != nil {
			return nil, err
		}
		catalog = discovery.RegistryCatalog(reg)
	}
	if opt.catalog != nil {
		catalog = opt.catalog
	}
	onc, err := connect("toolpool-bench-orchestrator")
	if err != nil {
		return nil, err
	}
	dc := dispatch.Config{Instance: "bench-" + nuidShort(), DefaultTimeout: cfg.TurnTimeout}
	if opt.dispatch != nil {
		opt.dispatch(&dc)
	}
	p.orch, err = orchhost.New(orchhost.Config{
		Conn: onc, NoPoisonWatcher: true, Catalog: catalog,
		Dispatch: dc, Metrics: promReg, Logger: cfg.Logger, Tracer: cfg.Tracer,
	})
	if err != nil {
		return nil, err
	}
	if err := p.orch.Start(ctx); err != nil {
		return nil, err
	}
	p.target = &poolTarget{d: p.orch, inputs: newCallInputs(cfg)}
	return p, nil
}

func (p *pool) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if p.orch != nil {
		_ = p.orch.Stop(ctx)
	}
	if p.server != nil {
		_ = p.server.Stop(ctx) // calls still running are handed back; the phase is over
	}
	for _, nc := range p.conns {
		nc.Close()
	}
}
