package dispatch

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// adviceCounter counts the messages on jetstream.AdviceSubject until each
// of its markers has arrived. A marker is published on a dispatcher's
// connection after its turns: a connection's messages keep their order,
// so once it arrives every message that dispatcher published before it
// has too. Dispatchers drop markers (no outcomes).
type adviceCounter struct {
	mu      sync.Mutex
	msgs    int
	markers map[string]bool
	sent    int // markers published
}

func countAdvice(t testing.TB, nc *nats.Conn) *adviceCounter {
	t.Helper()
	c := &adviceCounter{markers: map[string]bool{}}
	sub, err := nc.Subscribe(jetstream.AdviceSubject, func(m *nats.Msg) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if s := string(m.Data); strings.HasPrefix(s, "marker ") {
			c.markers[s] = true
			return
		}
		c.msgs++
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return c
}

// after publishes a marker on each connection, waits for them all and
// returns the messages counted.
func (c *adviceCounter) after(t testing.TB, conns ...*nats.Conn) int {
	t.Helper()
	var want []string
	for _, nc := range conns {
		c.mu.Lock()
		c.sent++
		m := fmt.Sprint("marker ", c.sent)
		c.mu.Unlock()
		want = append(want, m)
		if err := nc.Publish(jetstream.AdviceSubject, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the markers", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, m := range want {
			if !c.markers[m] {
				return false
			}
		}
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.msgs
}

// maybeTurn runs one call of the tool maybe on d in conversation conv of
// tenant acme, failing unless ok, and returns its result.
func maybeTurn(t *testing.T, d *Dispatcher, conv string, ok bool) envelope.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(WithTenant(context.Background(), "acme"), 30*time.Second)
	defer cancel()
	res, err := d.Dispatch(ctx, conv, []envelope.ToolUseBlock{use("c", "maybe", fmt.Sprintf(`{"ok":%t}`, ok))})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].IsError == ok {
		t.Fatalf("result %+v, want is_error %t", res[0], !ok)
	}
	return res[0]
}

// waitStreak waits until d counts n failures in a row of maybe in conv.
func waitStreak(t *testing.T, d *Dispatcher, conv string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("a run of %d on %s", n, d.Instance()), func() bool {
		return d.sessions.streak("acme", conv, "maybe") == n
	})
}

// startAdviceReplicas starts two replicas serving maybe and a worker for it.
func startAdviceReplicas(t *testing.T) (a, b *Dispatcher, anc, bnc *nats.Conn, bundle *testBundle) {
	t.Helper()
	bundle = setup(t)
	startWorker(t, bundle, "maybe", maybeFail)
	catalog := func(c *Config) { c.Catalog = discovery.StaticCatalog("maybe") }
	a, anc = startReplica(t, bundle, catalog)
	b, bnc = startReplica(t, bundle, catalog)
	return a, b, anc, bnc, bundle
}

// A conversation whose failing calls alternate between two replicas gets
// the advice on its third failure in a row, counted once each; a success
// on one replica ends the run the other one counts.
func TestAdviceAcrossReplicas(t *testing.T) {
	t.Parallel()
	a, b, _, _, _ := startAdviceReplicas(t)
	advice := classify.RepeatedFailureMessage("maybe", 3)
	const conv = "conv"

	if r := maybeTurn(t, a, conv, false); strings.Contains(r.Content.Text(), "times in a row") {
		t.Fatalf("first failure advised: %q", r.Content.Text())
	}
	waitStreak(t, b, conv, 1)
	if r := maybeTurn(t, b, conv, false); strings.Contains(r.Content.Text(), "times in a row") {
		t.Fatalf("second failure advised: %q", r.Content.Text())
	}
	waitStreak(t, a, conv, 2)
	if r := maybeTurn(t, a, conv, false); !strings.Contains(r.Content.Text(), advice) {
		t.Fatalf("third failure in a row (A, B, A): %q, want the advice %q", r.Content.Text(), advice)
	}
	waitStreak(t, b, conv, 3)

	// A success on B ends the run A counts: A's next failure is the first.
	maybeTurn(t, b, conv, true)
	waitStreak(t, a, conv, 0)
	if r := maybeTurn(t, a, conv, false); strings.Contains(r.Content.Text(), "times in a row") {
		t.Fatalf("first failure after a success on the other replica advised: %q", r.Content.Text())
	}
	waitStreak(t, b, conv, 1)
	if n := a.sessions.streak("acme", conv, "maybe"); n != 1 {
		t.Errorf("A counts %d failures in a row after a success and a failure, want 1", n)
	}
	// Another tenant's conversation of the same name is not touched.
	if n := b.sessions.streak("other", conv, "maybe"); n != 0 {
		t.Errorf("another tenant's conversation counts %d failures", n)
	}
}

// Successes of a conversation without a run publish nothing; a failure
// and the success that ends its run publish one message each.
func TestAdviceHappyPathPublishesNothing(t *testing.T) {
	t.Parallel()
	a, b, anc, bnc, bundle := startAdviceReplicas(t)
	c := countAdvice(t, bundle.nc)
	for i := range 10 {
		maybeTurn(t, a, "happy", true)
		maybeTurn(t, b, fmt.Sprint("happy", i), true)
	}
	if n := c.after(t, anc, bnc); n != 0 {
		t.Fatalf("%d messages for 20 successful turns, want 0", n)
	}
	maybeTurn(t, a, "happy", false)
	waitStreak(t, b, "happy", 1)
	maybeTurn(t, b, "happy", true) // ends the run: one message
	waitStreak(t, a, "happy", 0)
	maybeTurn(t, b, "happy", true) // no run left: none
	maybeTurn(t, a, "happy", true) // A heard of the end: none
	if n := c.after(t, anc, bnc); n != 2 {
		t.Fatalf("%d messages for a failure, the success after it and two more, want 2", n)
	}
}

func TestAdviceDecode(t *testing.T) {
	t.Parallel()
	a := &fleetAdvice{d: &Dispatcher{cfg: Config{Instance: "me"}}}
	key := hex.EncodeToString(make([]byte, 16))
	many := strings.Repeat(`{"tool":"t","failed":true},`, maxAdviceOutcomes)
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"valid", `{"instance":"other","session":"` + key + `","outcomes":[{"tool":"t","failed":true},{"tool":"t"}]}`, true},
		{"own", `{"instance":"me","session":"` + key + `","outcomes":[{"tool":"t","failed":true}]}`, false},
		{"invalid instance", `{"instance":"a.b","session":"` + key + `","outcomes":[{"tool":"t"}]}`, false},
		{"no instance", `{"session":"` + key + `","outcomes":[{"tool":"t"}]}`, false},
		{"short key", `{"instance":"other","session":"abcd","outcomes":[{"tool":"t"}]}`, false},
		{"not hex", `{"instance":"other","session":"` + strings.Repeat("zz", 16) + `","outcomes":[{"tool":"t"}]}`, false},
		{"invalid tool", `{"instance":"other","session":"` + key + `","outcomes":[{"tool":"a b"}]}`, false},
		{"no outcomes", `{"instance":"other","session":"` + key + `","outcomes":[]}`, false},
		{"too many", `{"instance":"other","session":"` + key + `","outcomes":[` + many + `{"tool":"t"}]}`, false},
		{"not JSON", `marker`, false},
	} {
		if _, _, ok := a.decode([]byte(tc.body)); ok != tc.ok {
			t.Errorf("%s: ok %t, want %t", tc.name, ok, tc.ok)
		}
	}
}

// The tracker takes what others tell within its bounds: a success of a
// session it does not track leaves nothing, failures of many sessions
// keep at most its cap.
func TestAdviceHeardBounded(t *testing.T) {
	t.Parallel()
	d := &Dispatcher{cfg: Config{Instance: "me"}, sessions: newSessionTracker(sessionShards*2, time.Hour)}
	a := &fleetAdvice{d: d}
	msg := func(i int, failed bool) *nats.Msg {
		key := scopeKeyOf("acme", fmt.Sprint("s", i))
		return &nats.Msg{Data: fmt.Appendf(nil, `{"instance":"other","session":"%x","outcomes":[{"tool":"t","failed":%t}]}`, key[:], failed)}
	}
	a.heard(msg(0, false))
	if n := d.sessions.len(); n != 0 {
		t.Fatalf("%d sessions tracked after a success of an untracked one", n)
	}
	for i := range 1000 {
		a.heard(msg(i, true))
	}
	if n := d.sessions.len(); n > sessionShards*2 {
		t.Errorf("%d sessions tracked, cap %d", n, sessionShards*2)
	}
	if n := d.sessions.streak("acme", "s999", "t"); n != 1 {
		t.Errorf("the latest session heard counts %d, want 1", n)
	}
}

// A turn's key and a turn of successes told to no one allocate nothing.
func TestAdviceHappyPathAllocs(t *testing.T) {
	d := &Dispatcher{cfg: Config{Instance: "me"}, sessions: newSessionTracker(100, time.Hour)}
	a := &fleetAdvice{d: d}
	session := strings.Repeat("s", 300)
	outs := []outcome{{tool: "echo"}, {tool: "other"}}
	n := testing.AllocsPerRun(100, func() {
		key := scopeKeyOf("acme", session)
		d.sessions.recordKey(key, time.Now(), outs)
		a.tell(key, outs)
	})
	if n != 0 {
		t.Errorf("%v allocations per successful turn, want 0", n)
	}
}

// BenchmarkAdviceHappyPath is successful turns of one host conversation,
// per tenant, with a second replica listening: it reports the messages on
// jetstream.AdviceSubject per turn (publishes/op), and fails if there is
// any.
func BenchmarkAdviceHappyPath(b *testing.B) {
	tb := setup(b, func(c *Config) { c.NoFairness = true })
	startEchoWorker(b, tb, "echo")
	other, err := New(Config{JS: tb.js, Catalog: discovery.StaticCatalog("echo"), NoFairness: true, Logger: tb.d.log})
	if err != nil {
		b.Fatal(err)
	}
	if err := other.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stopNow(other) })
	counter := natstest.Connect(b, tb.srv.ClientURL())
	c := countAdvice(b, counter)
	ctx := WithTenant(context.Background(), "acme")
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		calls := []envelope.ToolUseBlock{use("toolu_"+strconv.Itoa(i), "echo", `{"text":"hello"}`)}
		res, err := tb.d.Dispatch(ctx, "conversation", calls)
		if err != nil || res[0].IsError {
			b.Fatalf("turn %d: %v %+v", i, err, res)
		}
	}
	b.StopTimer()
	n := c.after(b, tb.nc)
	b.ReportMetric(float64(n)/float64(b.N), "publishes/op")
	if n != 0 {
		b.Fatalf("%d messages on %s for %d successful turns, want 0", n, jetstream.AdviceSubject, b.N)
	}
}

// BenchmarkSessionRecord is the tracker's work for a successful turn of
// one call: the session's key and its lookup.
func BenchmarkSessionRecord(b *testing.B) {
	st := newSessionTracker(MaxSessionsDefault, time.Hour)
	session := "mcp-session-0123456789abcdef0123456789abcdef"
	outs := []outcome{{tool: "echo"}}
	now := time.Now()
	for b.Loop() {
		st.recordKey(scopeKeyOf("acme", session), now, outs)
	}
}
