// Command bench measures the pool against raw JetStream on a three-node
// cluster of real nats-server processes on loopback, as e2e/cluster runs
// them (jetstream/server/cluster.conf and accounts.conf, streams at three
// replicas), with the pool's calls run by one and then two worker
// processes (cmd/worker):
//
//	go run ./e2e/cluster/bench                       # 1 and 2 workers, 3 rounds of 30,000 calls
//	go run ./e2e/cluster/bench --calls 100000 --concurrency 1024
//	go run ./e2e/cluster/bench --workers 2 --placement random
//	go run ./e2e/cluster/bench --workers 1 --server-profiles profiles --server-profile-seconds 5
//
// It builds nats-server (the version pinned in go.mod) and cmd/worker,
// starts the cluster once in a temporary directory, provisions the pool's
// streams, and then for each worker count starts that many worker
// processes and runs `orchestrator bench`'s phases in this process
// (internal/bench with external workers): per round the raw-JetStream
// baseline, then the pool. The baseline's streams copy the pool's (three
// replicas) and its executors run in this process, as many as the worker
// processes have slots, so that both sides have as many calls in
// execution. Before each phase the pool's streams are purged, so both
// phases start on empty streams, as on the bench's embedded server.
//
// Where things run moves the figures on a cluster: a publish from a
// connection on a node other than its stream's leader crosses a route,
// and so does every delivery of a consumer led elsewhere. By default
// (--placement one-node) every connection is made to the first node and,
// before each measured phase, the leaders of that phase's streams and
// work consumer are moved there, so both sides run on the same layout
// and the routes carry replication only (the result collectors, consumers
// of one replica, stay where the server put them; the report says where).
// --placement random leaves it to chance, as a deployment does.
//
// Over each measured phase it reads the CPU time of every process (this
// one, the workers, the three servers; /proc/PID/stat), the bytes and
// messages sent between the servers (/routez), the messages the servers
// handled (/varz), the JetStream API requests (/jsz), the messages each
// phase stored, and the load average, and prints them per call next to
// the bench's report: the two sides are compared on the whole CPU they
// cost, servers included, which the bench's own CPU figure (this process
// only) cannot do when the workers are other processes. The configuration
// is the deployment's, with one user added to its account for the bench
// (no permissions, for the baseline's streams and the setup) and the
// servers' profiling port; with --least-privilege the pool's dispatcher
// and workers connect as the deployment's orchestrator and worker users.
//
// It needs Linux (/proc) and the go command; it removes everything it
// started and wrote when it ends, also on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// options are the command's flags.
type options struct {
	workers           []int
	workerConcurrency int
	calls             int
	concurrency       int
	rounds            int
	payload           int
	replicas          int
	syncInterval      string
	leastPrivilege    bool
	placement         string
	profileDir        string
	profileSeconds    int
	jsonPath          string
	keep              bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "cluster bench:", err)
		stop()
		os.Exit(1)
	}
}

// parse reads the flags.
func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workers := fs.String("workers", "1,2", "worker process counts to measure, comma-separated; each runs the baseline and the pool")
	fs.IntVar(&o.workerConcurrency, "worker-concurrency", 256, "slots of each worker process (the baseline runs workers × this executors)")
	fs.IntVar(&o.calls, "calls", 30000, "calls measured per phase")
	fs.IntVar(&o.concurrency, "concurrency", 256, "simulated agents")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds per worker count (baseline then pool); medians are reported")
	fs.IntVar(&o.payload, "payload", 256, "bytes of each echo call's input JSON")
	fs.IntVar(&o.replicas, "replicas", 3, "replicas of the streams (1 shows what replication costs)")
	fs.StringVar(&o.syncInterval, "sync-interval", "120s", `the servers' JetStream sync_interval: "always" or a duration`)
	fs.StringVar(&o.placement, "placement", placementOneNode, "one-node: every connection and the leaders of both sides' streams and work consumers on the first node (the same layout for both; routes carry replication only); random: as a deployment runs, drawn anew each phase")
	fs.StringVar(&o.profileDir, "server-profiles", "", "write a CPU profile of each server over the first --server-profile-seconds of each measured phase into this directory (<workers>w-<phase>-<round>-<node>.prof)")
	fs.IntVar(&o.profileSeconds, "server-profile-seconds", 10, "length of the servers' CPU profiles; keep it below a phase's duration")
	fs.BoolVar(&o.leastPrivilege, "least-privilege", false, "the pool's dispatcher and workers connect as the deployment's orchestrator and worker users (the baseline keeps the bench user)")
	fs.StringVar(&o.jsonPath, "json", "", "also write the reports and the per-process figures as JSON to this file")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (servers' stores and logs) and print its path")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, s := range strings.Split(*workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return o, fmt.Errorf("--workers %q: want counts of at least 1, comma-separated", *workers)
		}
		o.workers = append(o.workers, n)
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.workerConcurrency < 1 || o.calls < 1 || o.concurrency < 1 || o.rounds < 1 || o.payload < 1:
		return o, errors.New("--worker-concurrency, --calls, --concurrency, --rounds and --payload must be at least 1")
	case o.placement != placementOneNode && o.placement != placementRandom:
		return o, fmt.Errorf("--placement %q: want %s or %s", o.placement, placementOneNode, placementRandom)
	case o.replicas != 1 && o.replicas != 3:
		return o, fmt.Errorf("--replicas %d: want 1 or 3", o.replicas)
	}
	return o, nil
}

// run builds the binaries, starts the cluster and measures each worker
// count.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "toolpool-cluster-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(stderr, "cluster bench: files in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	fmt.Fprintln(stderr, "cluster bench: building nats-server and cmd/worker")
	bins, err := build(dir)
	if err != nil {
		return err
	}
	c, err := startCluster(ctx, dir, bins, o.syncInterval)
	if err != nil {
		return err
	}
	defer c.stop()
	out := &output{Options: o.settings(), Machine: machineOf()}
	for _, n := range o.workers {
		res, err := measureWorkers(ctx, c, bins, o, n, stderr)
		if err != nil {
			return err
		}
		out.Runs = append(out.Runs, res)
	}
	if o.jsonPath != "" {
		if err := out.writeJSON(o.jsonPath); err != nil {
			return err
		}
	}
	return out.writeText(stdout)
}
