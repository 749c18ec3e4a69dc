package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/bench"
	"github.com/toolpool/toolpool/internal/progress"
	"github.com/toolpool/toolpool/jetstream"
)

// workerRun is what one worker count measured: the bench's report and,
// per measured phase, what the processes around it did.
type workerRun struct {
	Workers int           `json:"workers"`
	Report  *bench.Report `json:"report"`
	Phases  []phaseStat   `json:"phases"`
}

// phaseStat is what the processes did over one measured phase.
type phaseStat struct {
	Phase   string  `json:"phase"`
	Round   int     `json:"round"`
	Seconds float64 `json:"seconds"`
	// CPUSeconds is the CPU time (user + system) of each process: bench,
	// worker-N, nats-N.
	CPUSeconds map[string]float64 `json:"cpu_s"`
	// RouteBytes and RouteMsgs were sent between the servers (the sum of
	// every node's routes' out_bytes and out_msgs).
	RouteBytes uint64 `json:"route_bytes"`
	RouteMsgs  uint64 `json:"route_msgs"`
	// InMsgs and OutMsgs are the messages the servers received and sent
	// (clients and routes; /varz), APICalls the JetStream API requests
	// they served (/jsz: stream and consumer info, creations, ...).
	InMsgs   uint64 `json:"in_msgs"`
	OutMsgs  uint64 `json:"out_msgs"`
	APICalls uint64 `json:"api_calls"`
	// Load1 is the 1-minute load average when the phase began and ended.
	Load1 [2]float64 `json:"load1"`
	// CallsStored and ResultsStored count the messages the phase's call
	// and result streams took in (last sequence at the end minus at the
	// start), ResultBytes what its result stream grew by (the results
	// are kept; the calls leave their work queue when acked).
	CallsStored   uint64 `json:"calls_stored"`
	ResultsStored uint64 `json:"results_stored"`
	ResultBytes   int64  `json:"result_bytes"`
	// Topology is where the phase's streams were led and its
	// connections were when its measurement began.
	Topology topology `json:"topology"`
}

// sample is the counters at one moment.
type sample struct {
	at                    time.Time
	cpu                   map[string]float64
	routeBytes, routeMsgs uint64
	in, out, api          uint64
	load1                 float64
	calls, results        js.StreamState // of the phase's streams
}

// meter follows the phases of one worker count (bench.Config.OnPhase).
type meter struct {
	c         *cluster
	placement string // --placement
	replicas  int    // --replicas
	profiles  *serverProfiles
	label     string // of the worker count, in profile names
	workers   []*proc
	start     sample
	topo      topology
	phases    []phaseStat
}

// onPhase empties the pool's streams before each phase and samples the
// processes when the measured load begins and ends.
func (m *meter) onPhase(ctx context.Context, ev bench.PhaseEvent, name string, round int) error {
	for _, p := range m.workers {
		if err := p.exited(); err != nil {
			return err
		}
	}
	switch ev {
	case bench.PhaseStarting:
		return m.purge(ctx)
	case bench.PhaseMeasuring:
		// A stream of one replica has no leader to move: it stays on the
		// node it was placed on (the topology line says which).
		if m.placement == placementOneNode && m.replicas > 1 {
			if err := m.place(ctx, name, m.c.nodes[0].name); err != nil {
				return err
			}
		}
		m.topo = m.topologyOf(ctx, name)
		s, err := m.sample()
		m.start = s
		m.start.calls, m.start.results = m.streamStates(ctx, name)
		m.profiles.start(ctx, m.c, fmt.Sprintf("%s-%s-%d", m.label, name, round))
		return err
	case bench.PhaseMeasured:
		end, err := m.sample()
		if err != nil {
			return err
		}
		end.calls, end.results = m.streamStates(ctx, name)
		if err := m.profiles.wait(); err != nil {
			return err
		}
		st := phaseStat{
			Phase: name, Round: round, Seconds: end.at.Sub(m.start.at).Seconds(), CPUSeconds: map[string]float64{},
			RouteBytes: end.routeBytes - m.start.routeBytes, RouteMsgs: end.routeMsgs - m.start.routeMsgs,
			InMsgs: end.in - m.start.in, OutMsgs: end.out - m.start.out, APICalls: end.api - m.start.api,
			Load1: [2]float64{m.start.load1, end.load1}, Topology: m.topo,
			CallsStored:   end.calls.LastSeq - m.start.calls.LastSeq,
			ResultsStored: end.results.LastSeq - m.start.results.LastSeq,
			ResultBytes:   int64(end.results.Bytes) - int64(m.start.results.Bytes),
		}
		for k, v := range end.cpu {
			st.CPUSeconds[k] = v - m.start.cpu[k]
		}
		m.phases = append(m.phases, st)
	}
	return nil
}

// streamStates are the states of phase name's call and result streams
// (zero when they cannot be read).
func (m *meter) streamStates(ctx context.Context, name string) (calls, results js.StreamState) {
	cs, rs, _ := phaseNames(name)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if s, err := m.c.js.Stream(ctx, cs); err == nil {
		calls = s.CachedInfo().State
	}
	if s, err := m.c.js.Stream(ctx, rs); err == nil {
		results = s.CachedInfo().State
	}
	return calls, results
}

// purge empties TOOL_CALLS and TOOL_RESULTS (their consumers stay), so a
// pool phase starts on empty streams as the baseline's phase does.
func (m *meter) purge(ctx context.Context) error {
	for _, name := range []string{jetstream.StreamCalls, jetstream.StreamResults} {
		s, err := m.c.js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		if err := s.Purge(ctx); err != nil {
			return fmt.Errorf("purge %s: %w", name, err)
		}
	}
	return nil
}

// sample reads the processes' CPU times, the routes' counters and the
// load average.
func (m *meter) sample() (sample, error) {
	s := sample{at: time.Now(), cpu: map[string]float64{}}
	var err error
	if s.cpu["bench"], err = cpuSeconds("self"); err != nil {
		return s, err
	}
	for _, p := range m.workers {
		if s.cpu[p.name], err = cpuSeconds(strconv.Itoa(p.pid())); err != nil {
			return s, err
		}
	}
	for _, n := range m.c.nodes {
		if s.cpu[n.name], err = cpuSeconds(strconv.Itoa(n.pid())); err != nil {
			return s, err
		}
		b, msgs, err := routeCounters(n.monitor)
		if err != nil {
			return s, err
		}
		s.routeBytes += b
		s.routeMsgs += msgs
		var vz struct {
			InMsgs  uint64 `json:"in_msgs"`
			OutMsgs uint64 `json:"out_msgs"`
		}
		var jz struct {
			API struct {
				Total uint64 `json:"total"`
			} `json:"api"`
		}
		if err := getJSON(n.monitor, "/varz", &vz); err != nil {
			return s, err
		}
		if err := getJSON(n.monitor, "/jsz", &jz); err != nil {
			return s, err
		}
		s.in += vz.InMsgs
		s.out += vz.OutMsgs
		s.api += jz.API.Total
	}
	s.load1 = load1()
	return s, nil
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// cpuSeconds is the CPU time (user + system, all threads) of process pid
// ("self" for this one), from /proc/PID/stat.
func cpuSeconds(pid string) (float64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, fmt.Errorf("CPU time of process %s: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields are counted after its closing one. utime and stime are
	// fields 14 and 15, the 12th and 13th after it.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat: %d fields after the name", pid, len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%s/stat: %w", pid, err)
	}
	return float64(utime+stime) / clockTicks, nil
}

// load1 is the 1-minute load average (0 when it cannot be read).
func load1() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	x, _ := strconv.ParseFloat(f[0], 64)
	return x
}

// routeCounters sums what node at monitor sent on its routes.
func routeCounters(monitor string) (bytes, msgs uint64, err error) {
	var rz struct {
		Routes []struct {
			OutMsgs  uint64 `json:"out_msgs"`
			OutBytes uint64 `json:"out_bytes"`
		} `json:"routes"`
	}
	if err := getJSON(monitor, "/routez", &rz); err != nil {
		return 0, 0, err
	}
	for _, r := range rz.Routes {
		bytes += r.OutBytes
		msgs += r.OutMsgs
	}
	return bytes, msgs, nil
}

// getJSON decodes the monitoring endpoint path of the node at monitor
// into v.
func getJSON(monitor, path string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+monitor+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s of %s: %w", path, monitor, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("%s of %s: %w", path, monitor, err)
	}
	return nil
}

// measureWorkers starts n worker processes on the cluster and runs the
// bench's rounds against them, the baseline with as many executors as
// the workers have slots.
func measureWorkers(ctx context.Context, c *cluster, bins binaries, o options, n int, stderr io.Writer) (workerRun, error) {
	if err := provision(ctx, c, o.replicas); err != nil {
		return workerRun{}, err
	}
	poolUser, workerUser := userBench, userBench
	if o.leastPrivilege {
		poolUser, workerUser = userOrchestrator, userWorker
	}
	m := &meter{c: c, placement: o.placement, replicas: o.replicas, label: fmt.Sprintf("%dw", n),
		profiles: &serverProfiles{dir: o.profileDir, seconds: o.profileSeconds}}
	urls := c.urls()
	if o.placement == placementOneNode {
		urls = "nats://" + c.nodes[0].client
	}
	defer func() {
		for _, p := range m.workers {
			p.stop(30 * time.Second)
		}
	}()
	for i := range n {
		name := fmt.Sprintf("worker-%d", i+1)
		p, err := startProc(c.dir, name, bins.worker,
			[]string{"--demo-tools", "--concurrency", strconv.Itoa(o.workerConcurrency), "--log-level", "warn", "--id", name},
			[]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
				"NATS_URL=" + urls, "NATS_USER=" + workerUser, "NATS_PASSWORD=" + c.passwords[workerUser]})
		if err != nil {
			return workerRun{}, err
		}
		m.workers = append(m.workers, p)
	}
	if err := waitPulling(ctx, c, m.workers); err != nil {
		return workerRun{}, err
	}
	fmt.Fprintf(stderr, "cluster bench: %d worker process(es) pulling; %d round(s) of %d calls per phase\n", n, o.rounds, o.calls)
	rep, err := bench.Run(ctx, bench.Config{
		NATSURL: urls, ExternalWorkers: true,
		// The baseline's executors: as many as the worker processes' slots.
		Workers: n, WorkerConcurrency: o.workerConcurrency,
		Calls: o.calls, Concurrency: o.concurrency, Rounds: o.rounds, Payload: o.payload,
		Connect: func(_, name string) (*nats.Conn, error) {
			user := userBench
			if name == "toolpool-bench-orchestrator" {
				user = poolUser
			}
			return c.connectTo(urls, user, name)
		},
		Progress: progress.Terminal(stderr),
		OnPhase:  m.onPhase,
	})
	if err != nil {
		return workerRun{}, err
	}
	return workerRun{Workers: n, Report: rep, Phases: m.phases}, nil
}

// provision makes the pool's streams at replicas. A meta leader can
// answer before it knows all three peers ("no suitable peers for
// placement"): that is retried for up to a minute.
func provision(ctx context.Context, c *cluster, replicas int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := jetstream.Provision(pctx, c.js, jetstream.Config{Replicas: replicas})
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) || !strings.Contains(err.Error(), "no suitable peers") {
			return fmt.Errorf("provision the streams at %d replicas: %w", replicas, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitPulling waits until the tool's consumer has a pull request waiting
// from each worker, up to a minute.
func waitPulling(ctx context.Context, c *cluster, workers []*proc) error {
	deadline := time.Now().Add(time.Minute)
	consumer := jetstream.ConsumerPrefix + bench.ToolEcho
	for {
		for _, p := range workers {
			if err := p.exited(); err != nil {
				return err
			}
		}
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		info, err := consumerInfo(ictx, c.js, consumer)
		cancel()
		if err == nil && info.NumWaiting >= len(workers) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the workers were not all pulling after a minute (consumer %s: %v, %+v)", consumer, err, info)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func consumerInfo(ctx context.Context, j js.JetStream, name string) (*js.ConsumerInfo, error) {
	cons, err := j.Consumer(ctx, jetstream.StreamCalls, name)
	if err != nil {
		return nil, err
	}
	return cons.Info(ctx)
}

// quietLogger drops the connections' events below warnings.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
