package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
)

// load is what the agents of one scenario do: agents goroutines, each with
// a session of its own, post turns of callsPerTurn tool_use blocks one
// after another. An answer that is not a result for every call (a
// connection error, a 5xx or 429, an is_error result: the tool itself
// never fails) makes the agent post the same message again, same ids and
// content, as docs/http-api.md advises, until every call of the turn has
// its result or the agent's budget ends.
type load struct {
	tool         string // tool or tallyOnce
	agents       int
	turns        int // per agent
	callsPerTurn int
	budget       time.Duration // per agent, from the start of the load
	postTimeout  time.Duration // ?timeout= of each POST
}

// defaultLoad is the load of every scenario: 16 agents × 10 turns × 2
// calls, 320 calls. It takes 5–25 s, depending on how loaded the machine
// is (two scenarios run at once); the budget only bounds a failing run.
//
// The calls in flight when the fault hits are one turn per agent, 32,
// whatever the number of turns: more turns only add calls before and
// after the fault. It was 20 turns (640 calls) until the suite's CPU time
// was measured: each call costs the machine about 20 ms of CPU, two
// thirds of it starting the exec tool's two processes (sh and sleep), so
// the load was most of the suite's CPU. With 10 turns the fault (at a
// third of the results) still comes after three turns of every agent,
// and six or seven turns follow it; underLoad checks that at least half
// of the 32 were outstanding at the fault.
var defaultLoad = load{tool: tool, agents: 16, turns: 10, callsPerTurn: 2, budget: 2 * time.Minute, postTimeout: 45 * time.Second}

// call is one tool call an agent makes.
type call struct {
	id     string // tool_use id, unique in the run
	marker string // the tool's input; the result must be "tallied <marker>"
}

// outcome is what the agents saw.
type outcome struct {
	calls       []call
	received    map[string]time.Time // call id → first successful result
	unknown     map[string]bool      // calls answered "outcome unknown" (tallyOnce only): final, not a success
	duplicated  int                  // result blocks beyond the first for one id in one answer
	foreign     []string             // results for an id the answer's request did not hold
	wrong       []string             // a success whose content is not the call's
	reposts     int                  // messages posted again
	reposted    map[string]bool      // calls whose message was posted more than once
	errs        map[string]int       // why messages were posted again, by kind
	maxStall    time.Duration
	longestTurn time.Duration // the longest time one agent waited for one turn
	elapsed     time.Duration
	// Set by the scenario: when the fault hit, the calls outstanding
	// then, and the executions the tool had started by then, by marker.
	faultAt            time.Time
	outstandingAtFault int
	ranBeforeFault     map[string][]string
}

// tracker follows progress across agents: calls outstanding and the
// longest time without any result while some were.
type tracker struct {
	mu          sync.Mutex
	outstanding int
	last        time.Time // last result, or when calls became outstanding
	maxStall    time.Duration
	results     int
	ids         map[string]bool // the calls answered
}

func (k *tracker) posted(n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.outstanding == 0 {
		k.last = time.Now()
	}
	k.outstanding += n
}

func (k *tracker) answered(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ids == nil {
		k.ids = map[string]bool{}
	}
	k.ids[id] = true
	now := time.Now()
	k.maxStall = max(k.maxStall, now.Sub(k.last))
	k.last = now
	k.outstanding--
	k.results++
}

// abandoned counts calls given up at the end of a budget: the time since
// the last result counts as a stall.
func (k *tracker) abandoned(n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if n == 0 {
		return
	}
	k.maxStall = max(k.maxStall, time.Since(k.last))
	k.outstanding -= n
}

func (k *tracker) done() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.results
}

// isAnswered says whether call id has its answer.
func (k *tracker) isAnswered(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ids[id]
}

// inFlight is how many calls are posted and not yet answered.
func (k *tracker) inFlight() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.outstanding
}

// run starts the load against apiURL; k reports the successful results
// and the calls outstanding as they come. wait returns the outcome once
// every agent has finished.
func (l load) run(t *testing.T, name, apiURL string) (k *tracker, wait func() outcome) {
	t.Helper()
	transport := &http.Transport{MaxIdleConnsPerHost: l.agents, DisableCompression: true}
	client := &http.Client{Transport: transport}
	k = &tracker{}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	out := outcome{received: map[string]time.Time{}, unknown: map[string]bool{}, errs: map[string]int{}, reposted: map[string]bool{}}
	start := time.Now()
	var wg sync.WaitGroup
	for a := range l.agents {
		var turns [][]call
		for n := range l.turns {
			var turn []call
			for c := range l.callsPerTurn {
				id := fmt.Sprintf("toolu_%s_a%02d_t%03d_c%d", name, a, n, c)
				turn = append(turn, call{id: id, marker: id})
			}
			turns = append(turns, turn)
			out.calls = append(out.calls, turn...)
		}
		ag := &agent{
			ctx: ctx, id: a, session: fmt.Sprintf("%s-agent-%02d", name, a), client: client, url: apiURL,
			tool: l.tool, deadline: start.Add(l.budget), postTimeout: l.postTimeout, k: k,
		}
		wg.Go(func() {
			ag.run(turns)
			mu.Lock()
			defer mu.Unlock()
			for id, at := range ag.received {
				out.received[id] = at
			}
			for id := range ag.unknown {
				out.unknown[id] = true
			}
			out.duplicated += ag.duplicated
			out.foreign = append(out.foreign, ag.foreign...)
			out.wrong = append(out.wrong, ag.wrong...)
			out.reposts += ag.reposts
			for id := range ag.reposted {
				out.reposted[id] = true
			}
			out.longestTurn = max(out.longestTurn, ag.longestWait)
			for kind, n := range ag.errs {
				out.errs[kind] += n
			}
		})
	}
	// A test that ends early (a fatal error) stops its agents before its
	// processes are killed.
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		transport.CloseIdleConnections()
	})
	return k, func() outcome {
		wg.Wait()
		transport.CloseIdleConnections()
		out.elapsed = time.Since(start)
		k.mu.Lock()
		out.maxStall = k.maxStall
		k.mu.Unlock()
		return out
	}
}

// agent is one agent's conversation.
type agent struct {
	ctx         context.Context // cancelled when the test ends
	tool        string
	id          int
	session     string
	client      *http.Client
	url         string
	deadline    time.Time
	postTimeout time.Duration
	k           *tracker

	received   map[string]time.Time
	unknown    map[string]bool
	duplicated int
	foreign    []string
	wrong      []string
	reposts    int
	reposted   map[string]bool
	errs       map[string]int
	// longestWait is the longest time one turn took, from its first post
	// to its last result.
	longestWait time.Duration
}

// run posts the turns one after another, each until it is answered or the
// budget ends; what is left when it ends is lost.
func (ag *agent) run(turns [][]call) {
	ag.received = map[string]time.Time{}
	ag.errs = map[string]int{}
	ag.unknown = map[string]bool{}
	ag.reposted = map[string]bool{}
	for i, turn := range turns {
		ag.k.posted(len(turn))
		posted := time.Now()
		ok := ag.turn(turn)
		ag.longestWait = max(ag.longestWait, time.Since(posted))
		if !ok {
			left := 0 // the turns after this one were never posted
			for _, c := range turns[i] {
				if _, ok := ag.received[c.id]; !ok {
					left++
				}
			}
			ag.k.abandoned(left)
			return
		}
	}
}

// turn posts one message until each of its calls has a successful result;
// false when the budget ran out first.
func (ag *agent) turn(calls []call) bool {
	var blocks []map[string]any
	for _, c := range calls {
		blocks = append(blocks, map[string]any{
			"type": "tool_use", "id": c.id, "name": ag.tool, "input": map[string]string{"marker": c.marker},
		})
	}
	body, err := json.Marshal(map[string]any{"role": "assistant", "content": blocks})
	if err != nil {
		panic(err)
	}
	backoff := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			ag.reposts++
			for _, c := range calls {
				ag.reposted[c.id] = true
			}
		}
		retryAfter, reason := ag.post(body, calls)
		if reason == "" {
			return true
		}
		ag.errs[reason]++
		wait := backoff
		if retryAfter > 0 {
			wait = min(retryAfter, 2*time.Second)
		}
		backoff = min(2*backoff, 2*time.Second)
		if time.Now().Add(wait).After(ag.deadline) {
			return false
		}
		select {
		case <-ag.ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

// post sends body once. It returns "" when every call has its result
// (now or from an earlier answer), else why the message must be posted
// again and the Retry-After the server asked for.
func (ag *agent) post(body []byte, calls []call) (time.Duration, string) {
	timeout := ag.postTimeout
	if left := time.Until(ag.deadline); left < timeout {
		timeout = left
	}
	if timeout < time.Second {
		return 0, "budget spent"
	}
	ctx, cancel := context.WithTimeout(ag.ctx, timeout+10*time.Second)
	defer cancel()
	url := fmt.Sprintf("%s/v1/tool_calls?timeout=%dms", ag.url, timeout.Milliseconds())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Toolpool-Session", ag.session)
	resp, err := ag.client.Do(req)
	if err != nil {
		return 0, "connection error"
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	resp.Body.Close()
	if err != nil {
		return 0, "connection error (reading the answer)"
	}
	if resp.StatusCode != http.StatusOK {
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return time.Duration(ra) * time.Second, fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	var ans struct {
		Role    string `json:"role"`
		Content []struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error"`
		} `json:"content"`
	}
	if err := json.Unmarshal(data, &ans); err != nil {
		return 0, "an answer that is not JSON"
	}
	want := map[string]call{}
	for _, c := range calls {
		want[c.id] = c
	}
	seen := map[string]int{}
	reason := ""
	for _, r := range ans.Content {
		c, ok := want[r.ToolUseID]
		if !ok {
			ag.foreign = append(ag.foreign, r.ToolUseID)
			continue
		}
		seen[c.id]++
		if seen[c.id] > 1 {
			ag.duplicated++
			continue
		}
		text := resultText(r.Content)
		if r.IsError && ag.tool == tallyOnce && text == classify.OutcomeUnknownMessage(ag.tool) {
			// The answer docs/operations.md gives for a call of a tool
			// that is not idempotent whose earlier attempt may have run:
			// final, the agent does not post it again.
			if _, done := ag.received[c.id]; !done {
				ag.received[c.id] = time.Now()
				ag.unknown[c.id] = true
				ag.k.answered(c.id)
			}
			continue
		}
		if r.IsError {
			if reason == "" {
				reason = "is_error: " + errorKind(text)
			}
			continue
		}
		if text != "tallied "+c.marker {
			ag.wrong = append(ag.wrong, fmt.Sprintf("%s got %q", c.id, text))
			continue
		}
		if _, done := ag.received[c.id]; !done {
			ag.received[c.id] = time.Now()
			ag.k.answered(c.id)
		}
	}
	for _, c := range calls {
		if _, ok := ag.received[c.id]; !ok && reason == "" {
			reason = "a call without a result in the answer"
		}
	}
	return 0, reason
}

// resultText is a tool_result's content as text: a string, or the text
// blocks of an array joined with newlines.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return string(raw)
	}
	var parts []string
	for _, b := range blocks {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n")
}

// errorKind shortens an is_error content to its first sentence, so that
// the log groups errors by kind.
func errorKind(text string) string {
	for _, end := range []string{". ", "; ", ": "} {
		if i := strings.Index(text, end); i > 0 {
			text = text[:i]
		}
	}
	if len(text) > 100 {
		text = text[:100]
	}
	return text
}

// result is one scenario's row of the table.
type result struct {
	scenario   string
	calls      int
	results    int
	lost       int
	duplicated int
	dupExecs   int
	stall      time.Duration
	command    string
}

// tableHeader is the head of the table in docs/reliability.md.
const tableHeader = "| scenario | calls | results | lost | duplicated results | duplicate executions | longest stall | command |\n" +
	"|---|---|---|---|---|---|---|---|\n"

func (r result) row() string {
	return fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %.1f s | `%s` |",
		r.scenario, r.calls, r.results, r.lost, r.duplicated, r.dupExecs, r.stall.Seconds(), r.command)
}

// mayRunAgain says whether docs/operations.md ("What runs how often")
// allows a call to run more than once in a scenario: ranOn are the workers
// that ran it, in order; running, whether it had started and had no result
// when the fault hit; reposted, whether its agent posted it again.
type mayRunAgain func(ranOn []string, running, reposted bool) bool

// check settles a scenario: it waits (bounded) for the queue to drain so
// late executions are counted, counts executions from the tool's log,
// logs the row and everything a failure needs, and asserts zero lost and
// zero duplicated results, and duplicate executions only of calls that
// allowed says may run again.
func check(t *testing.T, p *pool, name string, out outcome, allowed mayRunAgain) result {
	t.Helper()
	drained := false
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if p.callsQueued() == 0 {
			drained = true
			break
		}
	}
	perMarker, perWorker := p.executions()
	r := result{
		scenario: name, calls: len(out.calls), results: len(out.received), duplicated: out.duplicated,
		stall:   out.maxStall,
		command: "go test -race -count=1 -run '^" + t.Name() + "$' -v ./e2e/faults/",
	}
	var missing, neverRan, twice, twiceUnexplained []string
	for _, c := range out.calls {
		ranOn := perMarker[c.marker]
		if n := len(ranOn); n > 1 {
			r.dupExecs += n - 1
			got, ok := out.received[c.id]
			running := len(out.ranBeforeFault[c.marker]) > 0 && (!ok || got.After(out.faultAt))
			desc := fmt.Sprintf("%s (on %s; running at the fault: %v; posted again: %v)",
				c.id, strings.Join(ranOn, ","), running, out.reposted[c.id])
			twice = append(twice, desc)
			if !allowed(ranOn, running, out.reposted[c.id]) {
				twiceUnexplained = append(twiceUnexplained, desc)
			}
		}
		if _, ok := out.received[c.id]; !ok {
			missing = append(missing, c.id)
		} else if len(ranOn) == 0 && !out.unknown[c.id] {
			neverRan = append(neverRan, c.id)
		}
	}
	r.lost = len(missing)
	summary.Add(r.row())
	t.Logf("\n%s%s", tableHeader, r.row())
	t.Logf("load took %v; %d calls outstanding at the fault; longest turn %v; %d messages posted again (%s); %d calls answered \"outcome unknown\"; executions by worker %v; TOOL_CALLS drained: %v",
		out.elapsed.Round(time.Millisecond), out.outstandingAtFault, out.longestTurn.Round(time.Millisecond), out.reposts,
		formatCounts(out.errs), len(out.unknown), perWorker, drained)
	if len(twice) > 0 {
		t.Logf("calls that ran more than once: %s", firstN(twice, 40))
	}

	if r.lost > 0 {
		t.Errorf("%d of %d calls got no result within the agents' budget (lost): %s", r.lost, r.calls, firstN(missing, 40))
	}
	if r.duplicated > 0 {
		t.Errorf("%d duplicated results (more than one result for a call id in one answer)", r.duplicated)
	}
	if len(out.foreign) > 0 {
		t.Errorf("%d results for call ids the request did not hold: %s", len(out.foreign), firstN(out.foreign, 20))
	}
	if len(out.wrong) > 0 {
		t.Errorf("%d successful results that are not their call's: %s", len(out.wrong), firstN(out.wrong, 20))
	}
	if len(neverRan) > 0 {
		t.Errorf("%d calls answered with a success the tool never produced: %s", len(neverRan), firstN(neverRan, 20))
	}
	if len(twiceUnexplained) > 0 {
		t.Errorf("%d calls ran more than once where docs/operations.md says they run once: %s",
			len(twiceUnexplained), firstN(twiceUnexplained, 20))
	}
	if t.Failed() || !drained {
		t.Logf("NATS state:\n%s", p.natsState())
	}
	return r
}

func firstN(ids []string, n int) string {
	s := slices.Clone(ids)
	sort.Strings(s)
	more := ""
	if len(s) > n {
		more = fmt.Sprintf(" … and %d more", len(s)-n)
		s = s[:n]
	}
	return strings.Join(s, ", ") + more
}

func formatCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}
