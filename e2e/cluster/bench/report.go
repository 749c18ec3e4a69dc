package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/toolpool/toolpool/internal/bench"
)

// output is everything the command measured.
type output struct {
	Options settingsOut `json:"options"`
	Machine machineOut  `json:"machine"`
	Runs    []workerRun `json:"runs"`
}

// settingsOut echoes the options.
type settingsOut struct {
	Workers           []int  `json:"workers"`
	WorkerConcurrency int    `json:"worker_concurrency"`
	Calls             int    `json:"calls"`
	Concurrency       int    `json:"concurrency"`
	Rounds            int    `json:"rounds"`
	Payload           int    `json:"payload_bytes"`
	Replicas          int    `json:"replicas"`
	SyncInterval      string `json:"sync_interval"`
	LeastPrivilege    bool   `json:"least_privilege"`
	Placement         string `json:"placement"`
}

func (o options) settings() settingsOut {
	return settingsOut{
		Workers: o.workers, WorkerConcurrency: o.workerConcurrency, Calls: o.calls, Concurrency: o.concurrency,
		Rounds: o.rounds, Payload: o.payload, Replicas: o.replicas, SyncInterval: o.syncInterval, LeastPrivilege: o.leastPrivilege,
		Placement: o.placement,
	}
}

// machineOut is the machine, and how busy it was when the command began.
type machineOut struct {
	CPUs    int    `json:"cpus"`
	LoadAvg string `json:"loadavg_at_start"`
}

func machineOf() machineOut {
	b, _ := os.ReadFile("/proc/loadavg")
	return machineOut{CPUs: runtime.NumCPU(), LoadAvg: strings.TrimSpace(string(b))}
}

// writeJSON writes out as JSON to the file at path.
func (out *output) writeJSON(path string) error {
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeText prints, per worker count, the bench's report, the processes'
// CPU per call in each measured phase, and the medians.
func (out *output) writeText(w io.Writer) error {
	o := out.Options
	fmt.Fprintf(w, "Three nats-server processes on loopback, streams at %d replica(s), sync_interval %s, placement %s; %d CPUs, load average at start %s.\n",
		o.Replicas, o.SyncInterval, o.Placement, out.Machine.CPUs, out.Machine.LoadAvg)
	for _, r := range out.Runs {
		fmt.Fprintf(w, "\n== %d worker process(es) of %d slots; the baseline runs %d executors in the bench process\n\n",
			r.Workers, o.WorkerConcurrency, r.Workers*o.WorkerConcurrency)
		if err := r.Report.WriteText(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
		if err := r.writeProcesses(w); err != nil {
			return err
		}
	}
	return nil
}

// perCall is one measured phase's CPU per call by process group, in µs,
// and the cores each group kept busy.
type perCall struct {
	bench, workers, servers, total float64
	serverMax                      float64 // the busiest server's
	coresBench, coresWorkers       float64
	coresServers                   float64
	routeBytes, routeMsgs          float64
}

func (st phaseStat) perCall(calls uint64) perCall {
	var pc perCall
	if calls == 0 || st.Seconds <= 0 {
		return pc
	}
	n := float64(calls)
	for name, s := range st.CPUSeconds {
		switch {
		case name == "bench":
			pc.bench += s
		case strings.HasPrefix(name, "worker-"):
			pc.workers += s
		default:
			pc.servers += s
			pc.serverMax = max(pc.serverMax, s)
		}
	}
	pc.coresBench, pc.coresWorkers, pc.coresServers = pc.bench/st.Seconds, pc.workers/st.Seconds, pc.servers/st.Seconds
	pc.total = pc.bench + pc.workers + pc.servers
	for _, x := range []*float64{&pc.bench, &pc.workers, &pc.servers, &pc.total, &pc.serverMax} {
		*x = *x * 1e6 / n
	}
	pc.routeBytes, pc.routeMsgs = float64(st.RouteBytes)/n, float64(st.RouteMsgs)/n
	return pc
}

// writeProcesses prints the table of the processes' figures and the
// medians of the whole CPU per call.
func (r workerRun) writeProcesses(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tround\tcalls/s\tCPU µs/call: bench\tworkers\tservers\t(busiest)\ttotal\tcores: bench\tworkers\tservers\troute B/call\troute msgs/call\tload1\t")
	totals := map[string][]float64{}
	ratios := []float64{}
	var rawTotal float64
	for _, st := range r.Phases {
		ph, ok := r.phase(st.Phase, st.Round)
		if !ok {
			continue
		}
		pc := st.perCall(ph.Calls)
		totals[st.Phase] = append(totals[st.Phase], pc.total)
		switch st.Phase {
		case bench.PhaseBaseline:
			rawTotal = pc.total
		case bench.PhasePool:
			if rawTotal > 0 {
				ratios = append(ratios, pc.total/rawTotal)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t%.0f\t%.1f\t%.1f→%.1f\t\n",
			st.Phase, st.Round, ph.CallsPerSec, pc.bench, pc.workers, pc.servers, pc.serverMax, pc.total,
			pc.coresBench, pc.coresWorkers, pc.coresServers, pc.routeBytes, pc.routeMsgs, st.Load1[0], st.Load1[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, st := range r.Phases {
		per := func(x float64) float64 {
			if ph, ok := r.phase(st.Phase, st.Round); ok && ph.Calls > 0 {
				return x / float64(ph.Calls)
			}
			return 0
		}
		fmt.Fprintf(w, "%s %d: per call: stored %.2f calls, %.2f results (%.0f B); servers' messages in %.1f, out %.1f; API requests %.3f; %s\n",
			st.Phase, st.Round, per(float64(st.CallsStored)), per(float64(st.ResultsStored)), per(float64(st.ResultBytes)),
			per(float64(st.InMsgs)), per(float64(st.OutMsgs)), per(float64(st.APICalls)), st.Topology)
	}
	raw, pool := bench.Median(totals[bench.PhaseBaseline]), bench.Median(totals[bench.PhasePool])
	thr := 0.0
	if r.Report.Ratios != nil {
		thr = r.Report.Ratios.Throughput
	}
	_, err := fmt.Fprintf(w, "\n%d worker(s): pool/raw throughput %.2f; whole CPU per call (bench + workers + servers), medians: baseline %.0f µs, pool %.0f µs, pool/raw %.2f\n",
		r.Workers, thr, raw, pool, bench.Median(ratios))
	return err
}

// phase is the bench's figures of phase name in round.
func (r workerRun) phase(name string, round int) (bench.Phase, bool) {
	for _, p := range r.Report.Runs {
		if p.Name == name && p.Round == round {
			return p, true
		}
	}
	return bench.Phase{}, false
}
