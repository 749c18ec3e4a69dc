package bench

import (
	"context"
	"fmt"

	js "github.com/nats-io/nats.go/jetstream"
)

// The tenants of the scenario.
const (
	tenantA = "A" // the noisy one
	tenantB = "B" // the neighbour
	tenantC = "C" // a second key of the cap phase
)

// RunNoisyNeighbour runs the noisy-neighbour scenario: tenant A's backlog
// alone, then with tenant B's trickle; a per-key concurrency cap; a per-key
// rate limit; one tenant with the scheduler off and on. Each phase gets a
// fresh pool and empty streams on one embedded server.
func RunNoisyNeighbour(ctx context.Context, cfg NoisyConfig) (*NoisyReport, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	url, stop, err := startEmbedded(cfg.Logger)
	if err != nil {
		return nil, err
	}
	defer stop()
	base := Config{
		Workers: cfg.Workers, WorkerConcurrency: cfg.WorkerConcurrency, Storage: cfg.Storage,
		TurnTimeout: cfg.Timeout, Logger: cfg.Logger, Tool: ToolSleep, Sleep: cfg.Sleep,
	}.withDefaults()
	nc, err := base.Connect(url, "toolpool-bench")
	if err != nil {
		return nil, fmt.Errorf("bench: connect: %w", err)
	}
	defer nc.Close()
	j, err := js.New(nc)
	if err != nil {
		return nil, err
	}
	n := &noisyRun{
		cfg: cfg, base: base, url: url, slots: cfg.Workers * cfg.WorkerConcurrency,
		streams: &runner{cfg: base, js: j}, runID: nuidShort(), progress: newProgress(cfg.Progress),
	}
	if err := n.streams.freshPoolStreams(ctx); err != nil {
		return nil, err
	}
	rep := &NoisyReport{Machine: machine(), Settings: n.settings()}
	if rep.AAlone, rep.WithB, rep.B, err = n.backlogs(ctx); err != nil {
		return nil, err
	}
	if rep.Cap, err = n.capPhase(ctx); err != nil {
		return nil, err
	}
	if rep.Rate, err = n.ratePhase(ctx); err != nil {
		return nil, err
	}
	if rep.FairnessOff, rep.FairnessOn, rep.FairnessPairRatios, err = n.singleTenant(ctx); err != nil {
		return nil, err
	}
	rep.FairnessRatio = Median(rep.FairnessPairRatios)
	rep.Targets = n.targets(rep)
	rep.PeakRSSBytes = PeakRSS()
	return rep, nil
}

// settings echo the scenario's configuration.
func (n *noisyRun) settings() NoisySettings {
	cfg := n.cfg
	return NoisySettings{
		Scenario: ScenarioNoisyNeighbour, Storage: storageName(cfg.Storage),
		Workers: cfg.Workers, WorkerConcurrency: cfg.WorkerConcurrency, Slots: n.slots,
		SleepMillis: ms(cfg.Sleep), Backlog: cfg.Backlog, BacklogTurn: cfg.BacklogTurn, IntervalMillis: ms(cfg.Interval),
		Calls: cfg.Calls, Concurrency: cfg.Concurrency, Cap: cfg.Cap, CapCalls: cfg.CapCalls,
		Rate: cfg.Rate, Offered: cfg.Offered, RateForSeconds: cfg.RateFor.Seconds(),
		Admission: "calls in flight and queue depth unbounded, queue-wait refusal off: the whole backlog is admitted",
	}
}

// storageName names a storage type in the report: file or memory.
func storageName(s js.StorageType) string {
	if s == js.MemoryStorage {
		return "memory"
	}
	return "file"
}

// noisyRun runs the scenario's phases.
type noisyRun struct {
	cfg      NoisyConfig
	base     Config // for startPool
	url      string
	slots    int
	streams  *runner // freshPoolStreams
	runID    string
	phases   int
	progress *phaseProgress
}

// targets are the targets against what rep measured.
func (n *noisyRun) targets(rep *NoisyReport) []Target {
	bGoal := 5*ms(n.cfg.Sleep) + 50
	maxRun := 0
	for _, v := range rep.Cap.MaxRunning {
		maxRun = max(maxRun, v)
	}
	rateLo, rateHi := 0.9*float64(n.cfg.Rate), 1.1*float64(n.cfg.Rate)
	aRatio := ratio(rep.WithB.CallsPerSec, rep.AAlone.CallsPerSec)
	fRatio := rep.FairnessRatio
	return []Target{
		{Name: "B's p99, request to result", Measured: rep.B.Latency.P99, Unit: "ms",
			Goal: fmt.Sprintf("≤ %g ms (5 × %g ms + 50 ms)", bGoal, ms(n.cfg.Sleep)), Met: rep.B.Calls > 0 && rep.B.Errors == 0 && rep.B.Latency.P99 <= bGoal},
		{Name: "A's throughput with B / alone", Measured: aRatio * 100, Unit: "%",
			Goal: "≥ 90 %", Met: aRatio >= 0.9 && rep.WithB.Errors == 0},
		{Name: fmt.Sprintf("most calls of a key running, cap %d", n.cfg.Cap), Measured: float64(maxRun),
			Goal: fmt.Sprintf("≤ %d", n.cfg.Cap), Met: maxRun > 0 && maxRun <= n.cfg.Cap && rep.Cap.Errors == 0},
		{Name: fmt.Sprintf("served/s of a key, limit %d/s, offered %g/s", n.cfg.Rate, n.cfg.Offered), Measured: rep.Rate.ServedPerSec, Unit: "/s",
			Goal: fmt.Sprintf("%d ± 10 %% (%.4g to %.4g)", n.cfg.Rate, rateLo, rateHi), Met: rep.Rate.ServedPerSec >= rateLo && rep.Rate.ServedPerSec <= rateHi},
		{Name: "one tenant's throughput, fairness on / off (median of pairs)", Measured: fRatio,
			Goal: "≥ 0.95", Met: fRatio >= 0.95 && rep.FairnessOn.ErrorCalls == 0},
	}
}
