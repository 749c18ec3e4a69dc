package policy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The gate's parts are interfaces whose real implementations live on
// JetStream in their own packages (budget, rescache, approval), tested
// there and together in orchhost and e2e. These in-memory ones let the
// gate's own logic — the order, the words, the report — be tested alone.

type memCatalog map[string]pooltype.ToolInfo

func (c memCatalog) Lookup(_ context.Context, name string) (pooltype.ToolInfo, bool) {
	info, ok := c[name]
	return info, ok
}

func (c memCatalog) Names(context.Context) []string {
	var names []string
	for n := range c {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// countingNext answers every call with a success naming the call, or an
// error for tool "fail"; it counts the calls run per tool, and blocks
// each turn until release is closed when release is set.
type countingNext struct {
	mu      sync.Mutex
	ran     map[string]int
	turns   atomic.Int64
	release chan struct{}
	started chan struct{} // receives one value per turn begun, when set
	err     error
}

func (n *countingNext) Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	n.turns.Add(1)
	if n.started != nil {
		n.started <- struct{}{}
	}
	if n.release != nil {
		select {
		case <-n.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if n.err != nil {
		return nil, n.err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ran == nil {
		n.ran = map[string]int{}
	}
	out := make([]envelope.Result, len(calls))
	for i, c := range calls {
		n.ran[c.Name]++
		out[i] = envelope.Result{V: envelope.Version, CallID: c.ID, Tool: c.Name, Content: envelope.Text("ran " + c.Name + " " + string(c.Input))}
		if c.Name == "fail" {
			out[i].IsError, out[i].Code = true, "http_503"
		}
	}
	return out, nil
}

func (n *countingNext) count(tool string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ran[tool]
}

// memCache is a Cache in memory: the key is tool, tenant unless global,
// and the input's bytes with spaces removed (enough for these tests; the
// real canonical form is rescache's).
type memCache struct {
	mu      sync.Mutex
	cond    *sync.Cond
	results map[string]envelope.Result
	claims  map[string]bool
	failed  map[string]envelope.Result // the failure a run's release left, for its waiters
	puts    int
	waiting int // Awaits in progress
}

func newMemCache() *memCache {
	c := &memCache{results: map[string]envelope.Result{}, claims: map[string]bool{}}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (m *memCache) Key(c *Call) (string, bool) {
	if !strings.HasPrefix(string(c.Input), "{") {
		return "", false
	}
	who := c.Tenant
	if c.Info.Cache.Scope == "global" {
		who = "*"
	}
	return c.Tool + "|" + who + "|" + strings.ReplaceAll(string(c.Input), " ", ""), true
}

func (m *memCache) Get(_ context.Context, key string) (envelope.Result, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.results[key]
	return r, ok, nil
}

func (m *memCache) Put(_ context.Context, key string, res *envelope.Result, _ time.Duration) error {
	if res.IsError {
		return fmt.Errorf("an error result is not cached")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.results[key] = *res
	m.puts++
	m.cond.Broadcast()
	return nil
}

func (m *memCache) Claim(_ context.Context, key string, _ time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.claims[key] {
		return false, nil
	}
	m.claims[key] = true
	delete(m.failed, key) // a new run: the last one's failure was for its own waiters
	return true, nil
}

func (m *memCache) Release(_ context.Context, key string, failed *envelope.Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.claims, key)
	if failed != nil {
		if m.failed == nil {
			m.failed = map[string]envelope.Result{}
		}
		m.failed[key] = *failed
	}
	m.cond.Broadcast()
}

func (m *memCache) Await(ctx context.Context, key string) (envelope.Result, bool, error) {
	stop := context.AfterFunc(ctx, func() { m.mu.Lock(); m.cond.Broadcast(); m.mu.Unlock() })
	defer stop()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.waiting++
	defer func() { m.waiting-- }()
	for {
		if r, ok := m.results[key]; ok {
			return r, true, nil
		}
		if !m.claims[key] {
			if r, ok := m.failed[key]; ok {
				return r, true, nil
			}
			return envelope.Result{}, false, nil
		}
		if err := ctx.Err(); err != nil {
			return envelope.Result{}, false, err
		}
		m.cond.Wait()
	}
}

// memBudgets is one budget of limit calls for every tool of one tenant.
type memBudgets struct {
	mu      sync.Mutex
	tenant  string
	limit   int64
	spent   int64
	soft    int64 // Nearly from this spending on
	refunds int
}

type memSpend struct {
	b     *memBudgets
	cost  int64
	after int64
}

func (b *memBudgets) Active(tenant, _ string) bool { return tenant == b.tenant }

func (b *memBudgets) state() classify.Budget {
	return classify.Budget{Name: "daily", Limit: b.limit, Spent: b.spent, Period: "per day", ResetIn: 3 * time.Hour}
}

func (b *memBudgets) Charge(_ context.Context, c *Call) (Spend, error) {
	cost := int64(max(c.Info.Cost, 1))
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spent+cost > b.limit {
		return nil, &Exhausted{Budget: b.state()}
	}
	b.spent += cost
	return &memSpend{b: b, cost: cost, after: b.spent}, nil
}

func (s *memSpend) Refund(context.Context) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.spent -= s.cost
	s.b.refunds++
}

func (s *memSpend) Nearly() []classify.Budget {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if s.b.soft == 0 || s.after < s.b.soft {
		return nil
	}
	st := s.b.state()
	st.Spent = s.after
	return []classify.Budget{st}
}

// memApprovals decides from a preset map (id → decision); an undecided
// call waits until decide is called or ctx ends. It models the single use
// of an approval as package approval does: the first Use of an approved
// id records the use (at the fake clock's now); a Use or Hold within
// window of it finds the approval still good (the dispatcher answers the
// call sent again from the first run's result); after it the approval is
// spent and the call is held again: pending, until decided again.
type memApprovals struct {
	mu      sync.Mutex
	cond    *sync.Cond
	decided map[string]Decision
	held    map[string]bool
	holdErr error // Hold's error, when set (the bucket is unreachable)

	window time.Duration        // how long a use lets the call through again
	now    time.Time            // the fake clock (advance)
	usedAt map[string]time.Time // an id's first use since its approval
	uses   map[string]int       // the uses recorded (written) per id
	again  map[string]int       // the times an id was held again
	useErr error                // Use's error, when set
	onUse  func()               // called at the start of every Use, a's lock held
}

func newMemApprovals() *memApprovals {
	a := &memApprovals{
		decided: map[string]Decision{}, held: map[string]bool{},
		window: time.Hour, now: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC),
		usedAt: map[string]time.Time{}, uses: map[string]int{}, again: map[string]int{},
	}
	a.cond = sync.NewCond(&a.mu)
	return a
}

func approvalID(c *Call) string { return "ap-" + c.ID }

func (a *memApprovals) Required(c *Call) bool { return c.Info.Approval.Requires(c.Input) }

func (a *memApprovals) Hold(_ context.Context, c *Call) (Decision, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.holdErr != nil {
		return Decision{}, a.holdErr
	}
	id := approvalID(c)
	a.held[id] = true
	a.spendIfDue(id)
	if d, ok := a.decided[id]; ok {
		return d, nil
	}
	return Decision{ID: id}, nil
}

func (a *memApprovals) Use(_ context.Context, _ *Call, id string) (Decision, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.onUse != nil {
		a.onUse()
	}
	if a.useErr != nil {
		return Decision{ID: id}, a.useErr
	}
	a.spendIfDue(id)
	d, ok := a.decided[id]
	if !ok {
		return Decision{ID: id}, nil
	}
	if _, used := a.usedAt[id]; d.State == Approved && !used {
		a.usedAt[id] = a.now
		a.uses[id]++
	}
	return d, nil
}

// spendIfDue holds id again when its approval was used more than window
// ago. a.mu is held.
func (a *memApprovals) spendIfDue(id string) {
	at, used := a.usedAt[id]
	if !used || a.now.Before(at.Add(a.window)) {
		return
	}
	delete(a.usedAt, id)
	delete(a.decided, id)
	a.again[id]++
}

// advance moves the fake clock on.
func (a *memApprovals) advance(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.now = a.now.Add(d)
}

// counts returns the uses recorded for id and the times it was held
// again.
func (a *memApprovals) counts(id string) (uses, again int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.uses[id], a.again[id]
}

func (a *memApprovals) Wait(ctx context.Context, id string) (Decision, error) {
	stop := context.AfterFunc(ctx, func() { a.mu.Lock(); a.cond.Broadcast(); a.mu.Unlock() })
	defer stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		if d, ok := a.decided[id]; ok {
			return d, nil
		}
		if err := ctx.Err(); err != nil {
			return Decision{ID: id, Waited: time.Second}, err
		}
		a.cond.Wait()
	}
}

func (a *memApprovals) decide(id string, d Decision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d.ID = id
	a.decided[id] = d
	a.cond.Broadcast()
}

func (a *memApprovals) isHeld(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held[id]
}

var (
	_ Cache     = (*memCache)(nil)
	_ Budgets   = (*memBudgets)(nil)
	_ Approvals = (*memApprovals)(nil)
)
