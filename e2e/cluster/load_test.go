package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// Load of the failover tests: sessions agents calling one tool after
// another. 20 sessions as asked, so 20 calls are outstanding when the
// fault hits (runLoad checks at least half are). The number of calls sets
// only how long each third of the load lasts: a third (the calls that
// must finish while a node is down, before it is restarted) has to
// outlast the client's reconnect and the leader election, which the
// marks wait for anyway, since a third cannot finish without them. It
// was 2,000 (667 calls in the node's absence); 900 (300) shows the same
// and costs the three tests' servers a quarter to 40 % less CPU.
const (
	loadSessions = 20
	loadCalls    = 900
)

// pool is the orchestrator's side on a cluster: streams at three
// replicas, a dispatcher connected as the orchestrator user.
type pool struct {
	c *cluster
	j js.JetStream
	d *dispatch.Dispatcher
}

func startPool(t *testing.T, c *cluster) *pool {
	t.Helper()
	nc := c.connect(t, "orchestrator", orchPassword)
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	provisionR3(t, j, 60*time.Second)
	reg := tools.NewRegistry()
	if err := demo.Register(reg); err != nil {
		t.Fatal(err)
	}
	d := pooltest.StartOrchestrator(t, j.Conn(), discovery.RegistryCatalog(reg), func(c *pooltest.OrchestratorConfig) {
		c.Replicas = 3 // its buckets, as the streams
		c.Dispatch.DefaultTimeout, c.Dispatch.PublishTimeout = 2*time.Minute, 5*time.Second
	}).Dispatcher()
	p := &pool{c: c, j: j, d: d}
	// The cluster places a one-replica consumer on one of the stream's
	// three servers at random; the dispatcher makes its result consumer
	// again until it is on the server it is connected to, so that results
	// do not cross a route once more (it gives up after 20 tries: a
	// chance of 1 in 3,300 to find it elsewhere here).
	host, name, err := p.resultConsumerHost()
	if err != nil {
		t.Fatal(err)
	}
	if here := nc.ConnectedServerName(); host != here {
		t.Fatalf("the dispatcher's result consumer %s is on %s; its connection is on %s", name, host, here)
	}
	t.Logf("result consumer %s on %s, the connection's server", name, host)
	return p
}

// errCodeNoPeers is the JetStream API's error code for "no suitable peers
// for placement".
const errCodeNoPeers js.ErrorCode = 10005

// provisionR3 provisions the pool's streams at three replicas. Placing
// them needs, besides a complete meta group (startCluster waits for it),
// that the meta leader has had each peer's JetStream statistics, which a
// server sends every 250 ms at first and less often later, and which no
// API shows: until limit, JetStream's "no suitable peers for placement"
// is tried again, any other error fails the test at once.
func provisionR3(t *testing.T, j js.JetStream, limit time.Duration) {
	t.Helper()
	start := time.Now()
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := jetstream.Provision(ctx, j, jetstream.Config{Replicas: 3})
		cancel()
		if err == nil {
			if attempt > 1 {
				t.Logf("R3 streams provisioned at attempt %d, %v after the first", attempt, time.Since(start).Round(time.Millisecond))
			}
			return
		}
		if !isNoPeers(err) {
			t.Fatalf("provision R3 streams: %v", err)
		}
		if time.Since(start) > limit {
			t.Fatalf("provision R3 streams: the meta leader still finds no three peers for placement %v after the meta group was complete (%d attempts): %v",
				limit, attempt, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// isNoPeers reports whether err is JetStream's "no suitable peers for
// placement".
func isNoPeers(err error) bool {
	var apiErr *js.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeNoPeers
}

// waitRejoined waits up to limit until n, restarted at restartedAt, is
// back in the cluster: it accepts connections, the meta group has it as a
// current member, and every stream of the pool has it as a current
// replica.
func (p *pool) waitRejoined(t *testing.T, n *node, restartedAt time.Time, limit time.Duration) {
	t.Helper()
	start := time.Now()
	n.running().WaitListening(n.client, limit)
	p.c.waitMetaGroup(t, limit-time.Since(start))
	for {
		err := p.streamsComplete()
		if err == nil {
			break
		}
		if time.Since(start) > limit {
			t.Fatalf("%s restarted, not back in every stream's replicas after %v: %v", n.name, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s rejoined: a current member of the meta group and of every stream's replicas %v after its restart",
		n.name, time.Since(restartedAt).Round(time.Millisecond))
}

// streamsComplete is nil when each of the pool's streams has a leader and
// every other node as a current replica, else what is missing.
func (p *pool) streamsComplete() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, name := range []string{jetstream.StreamCalls, jetstream.StreamResults, jetstream.StreamDLQ} {
		s, err := p.j.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		ci := s.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" {
			return fmt.Errorf("stream %s has no leader", name)
		}
		current := map[string]bool{ci.Leader: true}
		for _, r := range ci.Replicas {
			if r.Current && !r.Offline {
				current[r.Name] = true
			}
		}
		for _, n := range p.c.nodes {
			if !current[n.name] {
				return fmt.Errorf("stream %s: %s is not a current replica (leader %s)", name, n.name, ci.Leader)
			}
		}
	}
	return nil
}

// streamLeader is the server name of the leader of stream name, which
// must have three replicas.
func (p *pool) streamLeader(t *testing.T, name string) string {
	t.Helper()
	leader, err := p.leaderOf(name)
	if err != nil {
		t.Fatal(err)
	}
	return leader
}

// leaderOf is streamLeader for goroutines other than the test's.
func (p *pool) leaderOf(name string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := p.j.Stream(ctx, name)
	if err != nil {
		return "", fmt.Errorf("stream %s: %w", name, err)
	}
	info := s.CachedInfo()
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return "", fmt.Errorf("stream %s has no leader: %+v", name, info.Cluster)
	}
	if info.Config.Replicas != 3 {
		return "", fmt.Errorf("stream %s has %d replicas, want 3", name, info.Config.Replicas)
	}
	return info.Cluster.Leader, nil
}

// warmUp waits until a worker answers tool.
func (p *pool) warmUp(t *testing.T, tool, input string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := p.d.Dispatch(ctx, "warm-up", []envelope.ToolUseBlock{{
		Type: "tool_use", ID: fmt.Sprintf("toolu_warm_%d", time.Now().UnixNano()), Name: tool, Input: json.RawMessage(input),
	}})
	if err != nil || len(res) != 1 || res[0].IsError {
		t.Fatalf("warm-up call: %v %+v", err, res)
	}
}

// warmUpWorkers sends turns of 16 calls of tool until each of the workers
// ids has answered one: every worker is pulling before the load begins.
// It uses a dispatcher of its own, so that check, which counts the load's
// results on the pool's result subject, does not see these.
func (p *pool) warmUpWorkers(t *testing.T, tool, input string, ids ...string) {
	t.Helper()
	reg := tools.NewRegistry()
	if err := demo.Register(reg); err != nil {
		t.Fatal(err)
	}
	d := pooltest.StartOrchestrator(t, p.j.Conn(), discovery.RegistryCatalog(reg), func(c *pooltest.OrchestratorConfig) { c.Replicas = 3 }).Dispatcher()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for turn := 0; ; turn++ {
		var blocks []envelope.ToolUseBlock
		for i := range 16 {
			blocks = append(blocks, envelope.ToolUseBlock{Type: "tool_use",
				ID: fmt.Sprintf("toolu_warmup_%d_%d_%d", time.Now().UnixNano(), turn, i), Name: tool, Input: json.RawMessage(input)})
		}
		res, err := d.Dispatch(ctx, "", blocks)
		if err != nil {
			t.Fatalf("warm-up: %v", err)
		}
		for _, r := range res {
			seen[r.WorkerID] = true
		}
		all := true
		for _, id := range ids {
			all = all && seen[id]
		}
		if all {
			break
		}
	}
	p.warmUp(t, tool, input)
}

// loadReport is what a load run saw.
type loadReport struct {
	results   map[string]int // call id → results received
	errors    []envelope.Result
	longest   time.Duration // longest time without any call finishing
	duringGap int           // calls finished between the first and second event
	inFlight  int           // calls sent and not yet answered when the first event came
	elapsed   time.Duration
	retried   int            // turns sent again after ErrUnavailable
	byWorker  map[string]int // worker id → successful results
	redeliv   int            // results that took more than one delivery
}

// runLoad sends calls calls of tool from sessions concurrent sessions, one
// call per turn. at1 runs once a third of the calls have finished and at2
// once two thirds have.
func (p *pool) runLoad(t *testing.T, prefix, tool, input string, at1, at2 func()) loadReport {
	t.Helper()
	var (
		mu       sync.Mutex
		rep      = loadReport{results: map[string]int{}, byWorker: map[string]int{}}
		finished atomic.Int64
		sent     atomic.Int64 // calls whose Dispatch began
		inFlight atomic.Int64 // sent − finished at the first event
		last     = time.Now()
		next     atomic.Int64
		wg       sync.WaitGroup
		marks    sync.WaitGroup
		gapStart atomic.Int64 // finished count at at1, +1
		gapEnd   atomic.Int64
		retried  atomic.Int64
	)
	first, second := make(chan struct{}), make(chan struct{})
	var once1, once2 sync.Once
	marks.Add(1)
	go func() {
		defer marks.Done()
		<-first
		gapStart.Store(finished.Load() + 1)
		inFlight.Store(sent.Load() - finished.Load())
		at1()
		<-second
		at2()
		gapEnd.Store(finished.Load() + 1)
	}()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for s := range loadSessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := fmt.Sprintf("%s-session-%d", prefix, s)
			for {
				n := next.Add(1)
				if n > loadCalls {
					return
				}
				id := fmt.Sprintf("toolu_%s_%05d", prefix, n)
				sent.Add(1)
				// A turn that JetStream did not store (ErrUnavailable: the
				// node holding the connection died, a leader election is
				// under way) is sent again with the same call id, as an
				// agent or the HTTP API's client does: the dispatcher and
				// JetStream's dedup make sure it runs at most once.
				var res []envelope.Result
				var err error
				giveUp := time.Now().Add(90 * time.Second)
				for wait := 100 * time.Millisecond; ; wait = min(2*wait, time.Second) {
					res, err = p.d.Dispatch(ctx, session, []envelope.ToolUseBlock{{
						Type: "tool_use", ID: id, Name: tool, Input: json.RawMessage(input),
					}})
					if !errors.Is(err, dispatch.ErrUnavailable) || time.Now().After(giveUp) {
						break
					}
					retried.Add(1)
					time.Sleep(wait)
				}
				now := time.Now()
				mu.Lock()
				rep.longest = max(rep.longest, now.Sub(last))
				last = now
				if err != nil {
					mu.Unlock()
					t.Errorf("Dispatch %s: %v", id, err)
					return
				}
				for _, r := range res {
					rep.results[r.CallID]++
					if r.IsError {
						rep.errors = append(rep.errors, r)
					} else {
						rep.byWorker[r.WorkerID]++
					}
					if r.Attempts > 1 {
						rep.redeliv++
					}
				}
				if len(res) != 1 || res[0].CallID != id {
					t.Errorf("Dispatch %s: got %d results %+v", id, len(res), res)
				}
				mu.Unlock()
				switch f := finished.Add(1); f {
				case loadCalls / 3:
					once1.Do(func() { close(first) })
				case 2 * loadCalls / 3:
					once2.Do(func() { close(second) })
				}
			}
		}()
	}
	wg.Wait()
	once1.Do(func() { close(first) })
	once2.Do(func() { close(second) })
	marks.Wait()
	rep.elapsed = time.Since(start)
	rep.retried = int(retried.Load())
	if g := gapEnd.Load() - gapStart.Load(); g > 0 {
		rep.duringGap = int(g)
	}
	rep.inFlight = int(inFlight.Load())
	// What makes the load a test of the fault: calls were outstanding
	// when it hit (each session has one at a time, sending the next as
	// soon as it has a result), and a third of the load ran between the
	// two events (the marks are a third apart).
	if rep.inFlight < loadSessions/2 {
		t.Errorf("%d calls were outstanding when the first event came, want at least %d of the %d sessions'", rep.inFlight, loadSessions/2, loadSessions)
	}
	if rep.duringGap < loadCalls/4 {
		t.Errorf("%d calls finished between the two events, want at least %d", rep.duringGap, loadCalls/4)
	}
	return rep
}

// check asserts every call of the run got exactly one successful result,
// and that the caller's result subject holds one result per call.
func (p *pool) check(t *testing.T, rep loadReport, prefix string) {
	t.Helper()
	for i := 1; i <= loadCalls; i++ {
		id := fmt.Sprintf("toolu_%s_%05d", prefix, i)
		if n := rep.results[id]; n != 1 {
			t.Errorf("call %s: %d results, want 1", id, n)
		}
	}
	if len(rep.results) != loadCalls {
		t.Errorf("%d distinct results, want %d", len(rep.results), loadCalls)
	}
	for i, r := range rep.errors {
		if i == 5 {
			break
		}
		t.Errorf("call %s: is_error result: %s", r.CallID, r.Content.Text())
	}
	if len(rep.errors) > 0 {
		t.Errorf("%d of %d calls ended in is_error", len(rep.errors), loadCalls)
	}
	if t.Failed() {
		p.logConsumers(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subject := jetstream.ResultFilter(p.d.Instance())
	natstest.Eventually(t, 30*time.Second, "TOOL_CALLS to be empty", func() bool {
		s, err := p.j.Stream(ctx, jetstream.StreamCalls)
		return err == nil && s.CachedInfo().State.Msgs == 0
	})
	s, err := p.j.Stream(ctx, jetstream.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, js.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	got := uint64(0) // one subject per call key
	for _, n := range info.State.Subjects {
		got += n
	}
	// + 1: the warm-up call
	if got != loadCalls+1 {
		t.Errorf("TOOL_RESULTS holds %d results for the caller, want %d (one per call)", got, loadCalls+1)
	}
}

// logConsumers logs the state of TOOL_CALLS and its consumers, to tell a
// stalled consumer from a stalled worker when a run fails.
func (p *pool) logConsumers(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := p.j.Stream(ctx, jetstream.StreamCalls)
	if err != nil {
		t.Logf("stream %s: %v", jetstream.StreamCalls, err)
		return
	}
	si := s.CachedInfo()
	t.Logf("stream %s: %d messages, first %d last %d, cluster %+v", jetstream.StreamCalls,
		si.State.Msgs, si.State.FirstSeq, si.State.LastSeq, si.Cluster)
	for name := range s.ConsumerNames(ctx).Name() {
		c, err := s.Consumer(ctx, name)
		if err != nil {
			t.Logf("consumer %s: %v", name, err)
			continue
		}
		ci := c.CachedInfo()
		t.Logf("consumer %s: pending %d, ack pending %d, waiting pulls %d, redelivered %d, delivered %d, ack floor %d, cluster %+v",
			name, ci.NumPending, ci.NumAckPending, ci.NumWaiting, ci.NumRedelivered,
			ci.Delivered.Stream, ci.AckFloor.Stream, ci.Cluster)
	}
}

func (r loadReport) log(t *testing.T, what string) {
	t.Logf("%d calls from %d sessions in %v (%.0f calls/s); %d outstanding at the first event; %d finished during %s; longest stall %v; %d turns sent again after ErrUnavailable",
		loadCalls, loadSessions, r.elapsed.Round(time.Millisecond), float64(loadCalls)/r.elapsed.Seconds(),
		r.inFlight, r.duringGap, what, r.longest.Round(time.Millisecond), r.retried)
}

// killNodeUnderLoad starts a cluster, a pool and two worker processes, and
// runs the load; a third into it, it kills with SIGKILL the node that
// victim names (what says what that node holds), and restarts it at two
// thirds. Every call must get exactly one result, none lost, none
// duplicated, and the restarted node must rejoin the cluster.
func killNodeUnderLoad(t *testing.T, prefix, what string, victim func(p *pool) (string, error)) *pool {
	t.Helper()
	c := startCluster(t, "always")
	p := startPool(t, c)
	for _, id := range []string{"w1", "w2"} {
		startWorkerProc(t, c, "worker", workerPassword, "--demo-tools", "--concurrency", "32", "--id", id)
	}
	p.warmUpWorkers(t, "echo", `{"text":"warm"}`, "w1", "w2")
	var killed *node
	var killedAt, restartedAt time.Time
	rep := p.runLoad(t, prefix, "echo", `{"text":"hello"}`,
		func() {
			name, err := victim(p)
			if err != nil {
				t.Errorf("before the kill: %v", err)
				return
			}
			for _, n := range c.nodes {
				if n.name == name {
					killed = n
				}
			}
			if killed == nil {
				t.Errorf("%s %q is none of the nodes", what, name)
				return
			}
			killedAt = time.Now()
			killed.kill()
			t.Logf("killed %s, %s", killed.name, what)
		},
		func() {
			if killed == nil {
				return
			}
			// Started only: the test's goroutine waits for it after the load.
			killed.launch(t)
			restartedAt = time.Now()
			t.Logf("restarted %s after %v", killed.name, time.Since(killedAt).Round(time.Millisecond))
		})
	rep.log(t, "the node's absence")
	p.check(t, rep, prefix)
	if killed != nil {
		p.waitRejoined(t, killed, restartedAt, 90*time.Second)
	}
	return p
}

// The leader of TOOL_CALLS is killed with SIGKILL a third into the load and
// restarted at two thirds: every call gets exactly one result.
func TestStreamLeaderKilledUnderLoad(t *testing.T) {
	t.Parallel()
	p := killNodeUnderLoad(t, "leader", "the leader of "+jetstream.StreamCalls, func(p *pool) (string, error) {
		return p.leaderOf(jetstream.StreamCalls)
	})
	t.Logf("new leader of %s: %s", jetstream.StreamCalls, p.streamLeader(t, jetstream.StreamCalls))
}

// One of two worker processes is killed with SIGKILL a third into the
// load: its calls in flight are redelivered to the other after AckWait
// (both run with --ack-wait 4s, the default being 20 s); every call gets
// exactly one result.
func TestWorkerProcessKilledUnderLoad(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "120s")
	p := startPool(t, c)
	results := p.d.ResultConsumer()
	const ackWait = 4 * time.Second
	victim := startWorkerProc(t, c, "worker", workerPassword, "--demo-tools", "--concurrency", "16", "--id", "victim",
		"--ack-wait", ackWait.String())
	startWorkerProc(t, c, "worker", workerPassword, "--demo-tools", "--concurrency", "16", "--id", "survivor",
		"--ack-wait", ackWait.String())
	p.warmUpWorkers(t, "echo", `{"text":"warm"}`, "victim", "survivor")
	if got := natstest.CallConsumerInfo(t, p.j, "echo").Config.AckWait; got != ackWait {
		t.Errorf("tool_echo's AckWait is %v; want the workers' --ack-wait %v", got, ackWait)
	}
	rep := p.runLoad(t, "worker", "echo", `{"text":"hello"}`,
		func() {
			victim.Kill()
			t.Logf("killed worker process %d", victim.PID())
		},
		func() {})
	rep.log(t, "the second third after the kill")
	p.check(t, rep, "worker")
	t.Logf("successful results by worker: %v; %d calls needed a redelivery", rep.byWorker, rep.redeliv)
	if rep.byWorker["victim"] == 0 || rep.byWorker["survivor"] == 0 {
		t.Errorf("results by worker %v: both workers should have served calls", rep.byWorker)
	}
	// No node went down: the result consumer placed at start delivered
	// every result, none of the consumers it was chosen among got in its way.
	if now := p.d.ResultConsumer(); now != results {
		t.Errorf("the dispatcher's result consumer is %s; it was %s at start, and nothing should have replaced it", now, results)
	}
}

// resultConsumerHost is the server holding the dispatcher's result
// consumer (one replica) and the consumer's name, the one the dispatcher
// takes its results from now.
func (p *pool) resultConsumerHost() (host, name string, err error) {
	name = p.d.ResultConsumer()
	if name == "" {
		return "", "", errors.New("the dispatcher has no result consumer now")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := p.j.Consumer(ctx, jetstream.StreamResults, name)
	if err != nil {
		return "", "", fmt.Errorf("consumer %s: %w", name, err)
	}
	if ci := c.CachedInfo(); ci.Cluster != nil && ci.Cluster.Leader != "" {
		return ci.Cluster.Leader, name, nil
	}
	return "", "", fmt.Errorf("result consumer %s has no leader", name)
}

// The node holding the dispatcher's result consumer (one replica, in
// memory) is killed with SIGKILL a third into the load and restarted at
// two thirds: the dispatcher notices, makes a new consumer on a live node
// that starts after the last result it handled, and every call gets
// exactly one result. The consumer is on the dispatcher's own server
// (startPool checks), so the kill also cuts the dispatcher's connection:
// it reconnects to another node and its new consumer is placed there.
func TestResultConsumerNodeKilledUnderLoad(t *testing.T) {
	t.Parallel()
	p := killNodeUnderLoad(t, "resnode", "the host of the dispatcher's result consumer", func(p *pool) (string, error) {
		host, _, err := p.resultConsumerHost()
		return host, err
	})
	if host, name, err := p.resultConsumerHost(); err == nil {
		t.Logf("result consumer now %s on %s; the connection is on %s", name, host, p.j.Conn().ConnectedServerName())
	}
}
