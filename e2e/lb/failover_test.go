package lb_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The load of the failover tests: how long each execution sleeps, and the
// workers' slots (fewer than the calls, so that most wait, held by a
// replica's scheduler or queued in TOOL_CALLS, when the replica is
// killed).
const (
	failoverNap     = 1.5 // seconds
	failoverWorkers = 2
	failoverSlots   = 25 // per worker
	failoverBudget  = 3 * time.Minute
	// failoverLease is the replicas' --async-lease (15 s by default):
	// the killed replica's async calls and tasks are adopted about that
	// long after its last lease refresh, which is what the async test
	// waits for. A live replica refreshes every third of it, so it keeps
	// its tasks through a stall of several seconds.
	failoverLease = 6 * time.Second
)

// outcome is what one call ended with, as its client saw it.
type outcome struct {
	id       string // the call's id and marker
	kind     string // the load's kind
	ref      string // where its answer is kept: an async call's Location, a task's id
	text     string // the result's text
	isError  bool
	results  int // results for this call in its final answer
	err      string
	done     time.Time
	retries  int // requests sent again after a connection error, a 5xx or a 429
	replicas map[string]int
}

// load is one kind of call of a failover test.
type load struct {
	kind  string // the outcome's kind and the id's prefix
	label string // the table's words for it
	calls int
	// run makes the call id as a client does, until it has its answer or
	// ctx ends; it calls accept once the pool holds the call.
	run func(ctx context.Context, s *stack, id string, accept func()) outcome
	// again asks for the answer of a completed call once more; nil when
	// the answer is not kept (sync calls).
	again func(ctx context.Context, s *stack, o outcome) outcome
}

// backoff is how long a client waits before sending a request again
// after attempt failed ones: Retry-After when the server sent one
// (at most 2 s), else 100 ms doubling to 1 s.
func backoff(attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			return min(time.Duration(s)*time.Second, 2*time.Second)
		}
	}
	return min(100*time.Millisecond<<min(attempt, 4), time.Second)
}

// transient reports whether an answer is one a client sends its request
// again for: the proxy's 502/503/504 while a replica dies, or 429.
func transient(code int) bool {
	return code == http.StatusBadGateway || code == http.StatusServiceUnavailable ||
		code == http.StatusGatewayTimeout || code == http.StatusTooManyRequests
}

// syncCall runs one sync HTTP call through the proxy as an agent would:
// POST until it has the call's result, the same message again after a
// connection error, a 5xx, a 429 or an is_error result (a replica that
// dies takes its callers' connections with it).
func syncCall(ctx context.Context, s *stack, id string, accept func()) outcome {
	o := outcome{id: id, kind: "sync", replicas: map[string]int{}}
	hdr := http.Header{"Toolpool-Session": {"lb-sync-" + id}}
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			o.err = "no result before the budget ended (" + o.err + ")"
			return o
		}
		if attempt == 0 {
			accept()
		}
		resp, body, err := s.postCalls("?timeout=2m", hdr, napCall(id))
		switch {
		case err != nil || transient(resp.StatusCode):
			o.retries++
			time.Sleep(backoff(attempt, resp))
			continue
		case resp.StatusCode != http.StatusOK:
			o.err = fmt.Sprintf("POST: %s: %s", resp.Status, body)
			return o
		}
		o.replicas[resp.Header.Get(replicaHeader)]++
		o = asyncOutcome(o, body)
		if o.err == "" && o.isError {
			o.err, o.text, o.results = "is_error: "+o.text, "", 0
			o.retries++
			time.Sleep(backoff(attempt, nil))
			continue
		}
		return o
	}
}

// asyncOutcome completes o from an answer in the Anthropic shape.
func asyncOutcome(o outcome, body []byte) outcome {
	var a anthropicAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		o.err = fmt.Sprintf("%s: %v: %s", o.ref, err, body)
		return o
	}
	for _, c := range a.Content {
		if c.ToolUseID != o.id {
			o.err = fmt.Sprintf("%s: a result for %q: %s", o.ref, c.ToolUseID, body)
			return o
		}
		o.results++
	}
	o.text, o.isError, _ = a.text(o.id)
	o.done = time.Now()
	return o
}

// failoverRow is one line of the suite's table.
type failoverRow struct {
	label                                 string
	calls, results, lost, dupRes, dupExec int
	retries                               int
	afterKill, total                      time.Duration
}

// TestReplicaKilledUnderSyncLoad runs 120 sync HTTP calls through the
// proxy (200 before; runFailover checks calls are still unanswered at the
// kill), more than twice the workers' 50 slots, and kills one replica with
// SIGKILL once a quarter of them have started: its callers lose their
// connections and post the same messages again, which the proxy hands to
// the replica left. Every call gets its result, none has two, and none
// ran twice (no worker and no NATS server died: docs/operations.md allows
// no second execution here).
func TestReplicaKilledUnderSyncLoad(t *testing.T) {
	runFailover(t, load{kind: "sync", label: "sync HTTP calls, posted again after a lost connection", calls: 120, run: syncCall})
}

// runFailover starts a stack, runs the loads' calls at once, kills the
// first replica with SIGKILL once every call is accepted and a quarter
// have started, waits for every call's end and checks and reports the
// outcomes.
func runFailover(t *testing.T, loads ...load) {
	s := startStack(t, stackConfig{workers: failoverWorkers, concurrency: failoverSlots, napSeconds: failoverNap, asyncLease: failoverLease})
	ctx, cancel := context.WithTimeout(context.Background(), failoverBudget)
	defer cancel()
	start := time.Now()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes []outcome
		accepted atomic.Int64
	)
	total := 0
	for _, l := range loads {
		total += l.calls
		for i := range l.calls {
			wg.Go(func() {
				var once sync.Once
				accept := func() { once.Do(func() { accepted.Add(1) }) }
				o := l.run(ctx, s, fmt.Sprintf("%s_%03d", l.kind, i), accept)
				accept() // a call that ended before it was accepted (its error is reported below)
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			})
		}
	}
	// The kill comes once every call is accepted (an MCP client cannot
	// tell whether a tools/call that got no answer created a task, and
	// would create a second one; async calls and tasks count once their
	// first poll is answered, so that polls are in flight at the kill)
	// and a quarter have started (400 clients at once, the async test's
	// load before, took 30 s to be accepted on a loaded machine: the
	// bound is twice waitLong).
	for deadline := time.Now().Add(2 * waitLong); accepted.Load() < int64(total) || len(s.executions()) < total/4; {
		if time.Now().After(deadline) {
			mu.Lock()
			var ended []string
			for _, o := range outcomes {
				ended = append(ended, o.id+": "+cmp.Or(o.err, o.text))
			}
			mu.Unlock()
			t.Fatalf("after %v, %d of %d calls accepted and %d started; calls ended: %q; the proxy's answers: %v",
				2*waitLong, accepted.Load(), total, len(s.executions()), ended, s.statusCounts())
		}
		time.Sleep(20 * time.Millisecond)
	}
	started := len(s.executions())
	victim := s.replicas[0]
	s.kill(victim)
	kill := time.Now()
	// What makes the load a test of the kill: calls of every kind were
	// still waiting for their answer when it hit.
	mu.Lock()
	open := map[string]int{}
	for _, l := range loads {
		open[l.kind] = l.calls
	}
	for _, o := range outcomes {
		open[o.kind]--
	}
	mu.Unlock()
	t.Logf("killed %s (SIGKILL) %v after the start, %d of %d calls started; calls without an answer yet, by kind: %v",
		victim.name, kill.Sub(start).Round(time.Millisecond), started, total, open)
	for _, l := range loads {
		if open[l.kind] == 0 {
			t.Errorf("every %s call was answered before the kill: the load ended before the fault", l.kind)
		}
	}
	wg.Wait()
	t.Logf("the proxy's answers, by replica and status: %v", s.statusCounts())
	for _, line := range strings.Split(s.lb.Output(), "\n") {
		if line != "" && !strings.HasPrefix(line, "lb ") && !strings.HasPrefix(line, "[") {
			t.Logf("haproxy: %s", line)
		}
	}
	ex := s.executions()
	for _, l := range loads {
		r := failoverRow{label: l.label}
		for _, o := range outcomes {
			if o.kind == l.kind {
				r.add(t, o, ex[o.id], start, kill)
			}
		}
		row := fmt.Sprintf("| replica kill -9 (1 of 2) under load: %s | %d | %d | %d | %d | %d | %.1f s after the kill, %.1f s in all |",
			r.label, r.calls, r.results, r.lost, r.dupRes, r.dupExec, r.afterKill.Seconds(), r.total.Seconds())
		t.Log(row, fmt.Sprintf("(%d requests sent again)", r.retries))
		summary.Add(row)
		if l.again != nil {
			s.checkRetrievable(t, l, outcomes)
		}
	}
}

// add counts o, whose call ran on the workers in ran, failing the test
// for a call lost, a wrong result, two results or two executions.
func (r *failoverRow) add(t *testing.T, o outcome, ran []string, start, kill time.Time) {
	t.Helper()
	r.calls++
	r.retries += o.retries
	switch {
	case o.err != "":
		r.lost++
		t.Errorf("%s: %s", o.id, o.err)
	case o.isError || o.text != "napped "+o.id:
		r.lost++
		t.Errorf("%s: result %q (is_error %v), want %q", o.id, o.text, o.isError, "napped "+o.id)
	default:
		r.results++
		r.afterKill = max(r.afterKill, o.done.Sub(kill))
		r.total = max(r.total, o.done.Sub(start))
	}
	if o.results > 1 {
		r.dupRes++
		t.Errorf("%s: %d results in one answer", o.id, o.results)
	}
	if len(ran) > 1 {
		r.dupExec += len(ran) - 1
		t.Errorf("%s ran %d times (workers %v)", o.id, len(ran), ran)
	}
}

// statusCounts is how many requests the proxy logged, by replica and
// status ("r1 502").
func (s *stack) statusCounts() map[string]int {
	n := map[string]int{}
	for _, l := range s.proxyLog() {
		if l.replica == "<NOSRV>" { // refused by the proxy itself: say what
			n[fmt.Sprintf("%s %s %d", l.replica, l.method, l.status)]++
			continue
		}
		n[fmt.Sprintf("%s %d", l.replica, l.status)]++
	}
	return n
}

// checkRetrievable asks for the answer of every completed call of l once
// more through the proxy (now only the replica left answers) and checks
// it is the same.
func (s *stack) checkRetrievable(t *testing.T, l load, outcomes []outcome) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	sort.Slice(outcomes, func(i, j int) bool { return outcomes[i].id < outcomes[j].id })
	for _, o := range outcomes {
		if o.kind != l.kind || o.err != "" {
			continue
		}
		again := l.again(ctx, s, o)
		if again.err != "" || again.text != o.text || again.isError != o.isError || again.results != o.results {
			t.Errorf("%s asked again after the kill: %q (is_error %v, %d results, error %q), first %q",
				o.id, again.text, again.isError, again.results, again.err, o.text)
		}
	}
}
