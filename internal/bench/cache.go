package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/orchestrator/rescache"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/internal/progress"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// ToolCached is the cache scenario's tool: it sleeps, counts its
// executions and answers with its input's query.
const ToolCached = "cached_lookup"

// Defaults of CacheConfig.
const (
	CacheCallsDefault       = 20_000
	CacheConcurrencyDefault = 64
	CacheTTLDefault         = 10 * time.Minute
)

// CacheConfig configures RunCache: the same sequence of calls, where a
// share Repeat of the inputs repeat earlier ones, without the result cache
// and with it.
type CacheConfig struct {
	// Repeat is the share of calls whose input repeats an earlier call's
	// (one drawn uniformly from the distinct inputs so far), in (0, 1].
	Repeat float64
	// Calls per phase. Default CacheCallsDefault.
	Calls int
	// Concurrency is the number of simulated agents, each with one call
	// at a time. Default CacheConcurrencyDefault.
	Concurrency int
	// Workers and WorkerConcurrency of the in-process workers. Default 1
	// and WorkerConcurrencyDefault.
	Workers, WorkerConcurrency int
	// Sleep is how long each execution of the tool takes. Default
	// SleepDefault.
	Sleep time.Duration
	// TTL of the cached results. Default CacheTTLDefault.
	TTL time.Duration
	// Storage of the embedded server's streams and bucket.
	Storage js.StorageType
	// Timeout bounds each call. Default TurnTimeoutDefault.
	Timeout time.Duration
	// Seed draws the inputs; the same seed gives the same sequence.
	Seed uint64
	// Logger, Progress (nil: none) and Connect (nil: nats.Connect) as in
	// Config.
	Logger   *slog.Logger
	Progress io.Writer
	Connect  func(url, name string) (*nats.Conn, error)
}

func (c CacheConfig) withDefaults() CacheConfig {
	c.Calls = cmp.Or(c.Calls, CacheCallsDefault)
	c.Concurrency = cmp.Or(c.Concurrency, CacheConcurrencyDefault)
	c.Workers = cmp.Or(c.Workers, 1)
	c.WorkerConcurrency = cmp.Or(c.WorkerConcurrency, WorkerConcurrencyDefault)
	c.Sleep = cmp.Or(c.Sleep, SleepDefault)
	c.TTL = cmp.Or(c.TTL, CacheTTLDefault)
	c.Timeout = cmp.Or(c.Timeout, TurnTimeoutDefault)
	c.Seed = cmp.Or(c.Seed, 24)
	return c
}

func (c CacheConfig) validate() error {
	switch {
	case !(c.Repeat > 0 && c.Repeat <= 1):
		return fmt.Errorf("bench: Repeat is %v; want a share in (0, 1], e.g. 0.8", c.Repeat)
	case c.Calls < 1 || c.Concurrency < 1 || c.Workers < 1 || c.WorkerConcurrency < 1:
		return fmt.Errorf("bench: Calls, Concurrency, Workers and WorkerConcurrency must be at least 1")
	case c.Sleep < 0 || c.TTL < time.Second || c.Timeout <= 0:
		return fmt.Errorf("bench: Sleep must not be negative, TTL at least 1s, Timeout positive")
	}
	return nil
}

// cacheInputs draws the phase's input numbers: the first is new; each
// next one repeats an earlier distinct input with probability repeat. It
// returns them and the number of distinct inputs.
func cacheInputs(calls int, repeat float64, seed uint64) ([]int, int) {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	ids := make([]int, calls)
	distinct := 0
	for i := range ids {
		if distinct > 0 && r.Float64() < repeat {
			ids[i] = r.IntN(distinct)
			continue
		}
		ids[i] = distinct
		distinct++
	}
	return ids, distinct
}

// cachedTool is ToolCached with its execution counter.
func cachedTool(sleep time.Duration, ttl time.Duration, runs *atomic.Int64) tools.Tool {
	return tools.Tool{
		Name:        ToolCached,
		Description: "Looks a query up (sleeps, then answers with it); the bench's cacheable tool.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`),
		Idempotent:  true,
		Cache:       &tools.CachePolicy{TTL: ttl},
		Handler: func(ctx context.Context, input json.RawMessage) (tools.Output, error) {
			runs.Add(1)
			t := time.NewTimer(sleep)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return tools.Output{}, ctx.Err()
			}
			return tools.Output{Content: envelope.Text("result for " + string(input))}, nil
		},
	}
}

// cacheCatalog is the registry's catalog with the tool's cache policy
// and a version of this run: no entry of an earlier run is found.
type cacheCatalog struct {
	pooltype.Catalog
	policy  *tools.CachePolicy
	version string
}

func (c cacheCatalog) Lookup(ctx context.Context, name string) (pooltype.ToolInfo, bool) {
	info, ok := c.Catalog.Lookup(ctx, name)
	if ok && name == ToolCached {
		info.Cache, info.Version = c.policy, c.version
	}
	return info, ok
}

// RunCache runs the cache scenario on an embedded server: the calls
// without the cache (straight to the dispatcher), then the same calls
// through the policy gate with the result cache, and reports throughput,
// latency and the tool's executions of each.
func RunCache(ctx context.Context, cfg CacheConfig) (*CacheReport, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	base := Config{
		Workers: cfg.Workers, WorkerConcurrency: cfg.WorkerConcurrency, Storage: cfg.Storage,
		TurnTimeout: cfg.Timeout, Logger: cfg.Logger, Tool: ToolCached, Sleep: cfg.Sleep, Connect: cfg.Connect,
	}.withDefaults()
	url, stop, err := startEmbedded(base.Logger)
	if err != nil {
		return nil, err
	}
	defer stop()
	nc, err := base.Connect(url, "toolpool-bench")
	if err != nil {
		return nil, fmt.Errorf("bench: connect: %w", err)
	}
	defer nc.Close()
	j, err := js.New(nc)
	if err != nil {
		return nil, err
	}
	if err := (&runner{cfg: base, js: j}).freshPoolStreams(ctx); err != nil {
		return nil, err
	}
	var runs atomic.Int64
	reg := tools.NewRegistry()
	if err := reg.Register(cachedTool(cfg.Sleep, cfg.TTL, &runs)); err != nil {
		return nil, err
	}
	catalog := cacheCatalog{Catalog: discovery.RegistryCatalog(reg), policy: &tools.CachePolicy{TTL: cfg.TTL}, version: nuidShort()}
	p, err := startPool(ctx, base, url, reg, poolOptions{catalog: catalog})
	if err != nil {
		return nil, err
	}
	defer p.stop()
	store, err := rescache.New(rescache.Config{JS: j, Storage: cfg.Storage, Logger: base.Logger})
	if err == nil {
		err = store.Start(ctx)
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = store.Stop(context.Background()) }()
	gate, err := policy.New(policy.Config{Next: p.orch.Dispatcher(), Catalog: catalog, Cache: store, Logger: base.Logger})
	if err != nil {
		return nil, err
	}
	ids, distinct := cacheInputs(cfg.Calls, cfg.Repeat, cfg.Seed)
	rep := &CacheReport{Machine: machine(), Settings: cfg.settings(distinct)}
	prog := newProgress(cfg.Progress)
	phases := []struct {
		name string
		d    policy.Dispatcher
		out  *CachePhase
	}{{"no cache", p.orch.Dispatcher(), &rep.NoCache}, {"cache", gate, &rep.Cache}}
	for i, ph := range phases {
		prog.setLabel(ph.name + " warm-up")
		warm := make([]int, 2*cfg.Concurrency)
		for j := range warm {
			warm[j] = -1 - j - i*len(warm) // inputs of their own, never measured
		}
		if _, err := cacheLoad(ctx, ph.d, cfg, "warm"+strconv.Itoa(i), warm, nil); err != nil {
			return nil, fmt.Errorf("bench: %s warm-up: %w", ph.name, err)
		}
		prog.setLabel(ph.name)
		before := runs.Load()
		bar := prog.begin(len(ids), 0)
		*ph.out, err = cacheLoad(ctx, ph.d, cfg, "c"+strconv.Itoa(i), ids, bar)
		bar.Finish()
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", ph.name, err)
		}
		ph.out.Name, ph.out.Executions = ph.name, runs.Load()-before
	}
	rep.finish()
	return rep, nil
}

// cacheLoad sends the calls of ids (input numbers) through d with
// cfg.Concurrency agents, one call per turn, and measures them.
func cacheLoad(ctx context.Context, d policy.Dispatcher, cfg CacheConfig, prefix string, ids []int, bar *progress.Bar) (CachePhase, error) {
	var next atomic.Int64
	var mu sync.Mutex
	var ph CachePhase
	lat := make([]time.Duration, 0, len(ids))
	start := time.Now()
	var wg sync.WaitGroup
	for a := range cfg.Concurrency {
		wg.Go(func() {
			var mine []time.Duration
			var counts [5]int
			errs := 0
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ids) {
					break
				}
				var r policy.Report
				cctx, cancel := context.WithTimeout(policy.WithReport(ctx, &r), cfg.Timeout)
				input := `{"q":"item-` + strconv.Itoa(ids[i]) + `"}`
				t0 := time.Now()
				res, err := d.Dispatch(cctx, prefix+"-agent-"+strconv.Itoa(a), []envelope.ToolUseBlock{{
					Type: "tool_use", ID: "toolu_" + prefix + "_" + strconv.Itoa(i), Name: ToolCached, Input: json.RawMessage(input),
				}})
				mine = append(mine, time.Since(t0))
				cancel()
				if err != nil || len(res) != 1 || res[0].IsError {
					errs++
				}
				if len(r.Cache) == 1 {
					counts[r.Cache[0]]++
				}
				bar.Add(1)
			}
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, mine...)
			ph.Errors += errs
			ph.Hits += counts[policy.CacheHit]
			ph.Misses += counts[policy.CacheMiss]
			ph.Coalesced += counts[policy.CacheCoalesced]
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if ph.Errors > len(ids)/100 {
		return ph, fmt.Errorf("%d of %d calls failed", ph.Errors, len(ids))
	}
	slices.Sort(lat)
	ph.Calls, ph.Seconds = len(ids), elapsed.Seconds()
	ph.Throughput = float64(len(ids)) / elapsed.Seconds()
	ph.P50Millis, ph.P99Millis = ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100])
	return ph, nil
}
