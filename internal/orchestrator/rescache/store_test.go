package rescache_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/orchestrator/rescache"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// The Prometheus metrics are the store's.
var _ rescache.Metrics = (*metrics.Cache)(nil)

// replica is a Store on a connection of its own, as another orchestrator
// would have.
func replica(t testing.TB, url string, cfg rescache.Config) *rescache.Store {
	t.Helper()
	j, err := js.New(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	cfg.JS = j
	if cfg.Logger == nil {
		cfg.Logger = natstest.Logger(t)
	}
	s, err := rescache.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

func searchCall(tenant, input string) *policy.Call {
	return &policy.Call{
		Tenant: tenant, Session: "s1", ID: "toolu_1", Tool: "search", Input: json.RawMessage(input),
		Info: pooltype.ToolInfo{Version: "3f2a9c", Cache: &tools.CachePolicy{TTL: time.Minute}},
	}
}

func result(text string) *envelope.Result {
	return &envelope.Result{CallID: "toolu_1", Tool: "search", Content: envelope.Text(text), WorkerID: "w1", ExecTime: 20 * time.Millisecond}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestAnotherReplicaReads: a result one replica stored is found by
// another, on another connection, under the key of the same call written
// another way.
func TestAnotherReplicaReads(t *testing.T) {
	srv := natstest.Start(t)
	m := &countMetrics{}
	a := replica(t, srv.ClientURL(), rescache.Config{Metrics: m})
	b := replica(t, srv.ClientURL(), rescache.Config{})
	ctx := ctxT(t)

	k, ok := a.Key(searchCall("acme", `{"q":"nats","limit":5}`))
	if !ok {
		t.Fatal("no key")
	}
	if _, found, err := b.Get(ctx, k); found || err != nil {
		t.Fatalf("before Put: found %v, %v", found, err)
	}
	stored := result("3 hits")
	stored.Key = envelope.CallKey("acme", "s1", "toolu_1", "search", []byte(`{"q":"nats","limit":5}`))
	if err := a.Put(ctx, k, stored, time.Minute); err != nil {
		t.Fatal(err)
	}
	k2, _ := b.Key(searchCall("acme", "{ \"limit\": 5,\n \"q\": \"nats\" }"))
	if k2 != k {
		t.Fatalf("the same call has another key on the other replica: %s, %s", k2, k)
	}
	got, found, err := b.Get(ctx, k2)
	if err != nil || !found {
		t.Fatalf("Get on the other replica: found %v, %v", found, err)
	}
	if got.Content.Text() != "3 hits" || got.IsError || got.Tool != "search" || got.CallID != "toolu_1" || got.WorkerID != "w1" || got.Key != "" {
		t.Fatalf("got %+v", got)
	}
	// another tenant does not see it
	kOther, _ := b.Key(searchCall("globex", `{"q":"nats","limit":5}`))
	if _, found, _ := b.Get(ctx, kOther); found {
		t.Fatal("another tenant's call found the entry")
	}
	// a key of the wrong form is a miss, not a subject
	for _, bad := range []string{"", "*", ">", k[:10] + ".x", strings.Repeat("z", 64)} {
		if _, found, err := b.Get(ctx, bad); found || err != nil {
			t.Fatalf("Get(%q) = %v, %v", bad, found, err)
		}
	}
	if _, found, _ := a.Get(ctx, k); !found {
		t.Fatal("the storing replica does not find it")
	}
	if stored.Key == "" || stored.V != 0 {
		t.Fatal("Put changed the caller's result")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stored["search"] != 1 || m.stores < 50 || m.lookups != 1 || m.hits != 1 || len(m.failed) != 0 {
		t.Fatalf("metrics: %+v", m)
	}
}

// TestReplace: a second Put of a key replaces the entry (a bypassed run),
// with the new TTL.
func TestReplace(t *testing.T) {
	srv := natstest.Start(t)
	s := replica(t, srv.ClientURL(), rescache.Config{})
	ctx := ctxT(t)
	k, _ := s.Key(searchCall("", `{"q":"x"}`))
	if err := s.Put(ctx, k, result("old"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, k, result("new"), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	got, found, err := s.Get(ctx, k)
	if err != nil || !found || got.Content.Text() != "new" {
		t.Fatalf("after the replace: %+v, %v, %v", got, found, err)
	}
	// one message for the key: the old one is gone, not merely shadowed
	natstest.WithJS(srv.ClientURL(), func(ctx context.Context, j js.JetStream) {
		st, err := j.Stream(ctx, "KV_"+rescache.BucketDefault)
		if err != nil {
			t.Fatal(err)
		}
		if n := st.CachedInfo().State.Msgs; n != 1 {
			t.Errorf("the bucket holds %d messages; want 1", n)
		}
	})
	// the replacing TTL holds: the entry goes after 2 s, not an hour
	natstest.Eventually(t, 15*time.Second, "the replaced entry to expire", func() bool {
		_, found, err := s.Get(ctx, k)
		return err == nil && !found
	})
}

// TestExpiry: an entry is found until its TTL, and not after.
func TestExpiry(t *testing.T) {
	srv := natstest.Start(t)
	a := replica(t, srv.ClientURL(), rescache.Config{})
	b := replica(t, srv.ClientURL(), rescache.Config{})
	ctx := ctxT(t)
	k, _ := a.Key(searchCall("acme", `{"q":"short"}`))
	long, _ := a.Key(searchCall("acme", `{"q":"long"}`))
	stored := time.Now()
	if err := a.Put(ctx, k, result("brief"), 1500*time.Millisecond); err != nil { // rounded up to 2 s
		t.Fatal(err)
	}
	if err := a.Put(ctx, long, result("kept"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, found, err := b.Get(ctx, k); !found || err != nil {
		t.Fatalf("right after Put: %v, %v", found, err)
	}
	natstest.Eventually(t, 15*time.Second, "the entry to expire", func() bool {
		_, found, err := b.Get(ctx, k)
		return err == nil && !found
	})
	if waited := time.Since(stored); waited < 2*time.Second {
		t.Fatalf("the entry expired after %v; its TTL was 2 s", waited)
	}
	if _, found, err := b.Get(ctx, long); !found || err != nil {
		t.Fatalf("the entry with an hour to live: %v, %v", found, err)
	}
	// a key expired can be stored again
	if err := b.Put(ctx, k, result("again"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, found, _ := a.Get(ctx, k); !found || got.Content.Text() != "again" {
		t.Fatalf("stored again: %v %+v", found, got)
	}
}

// TestPutRefuses: what must not be cached is refused before any round
// trip, with a clear error.
func TestPutRefuses(t *testing.T) {
	srv := natstest.Start(t)
	m := &countMetrics{}
	s := replica(t, srv.ClientURL(), rescache.Config{Metrics: m})
	ctx := ctxT(t)
	k, _ := s.Key(searchCall("", `{"q":"x"}`))
	failed := result("upstream 503")
	failed.IsError, failed.Code = true, "http_503"
	var maxPayload int
	natstest.WithJS(srv.ClientURL(), func(_ context.Context, j js.JetStream) { maxPayload = int(j.Conn().MaxPayload()) })
	huge := result(strings.Repeat("x", maxPayload))
	for name, tc := range map[string]struct {
		key  string
		res  *envelope.Result
		ttl  time.Duration
		want string
	}{
		"is_error":  {k, failed, time.Minute, "is_error"},
		"nil":       {k, nil, time.Minute, "no result"},
		"zero ttl":  {k, result("a"), 0, "ttl"},
		"neg ttl":   {k, result("a"), -time.Second, "ttl"},
		"long ttl":  {k, result("a"), 8 * 24 * time.Hour, "ttl"},
		"bad key":   {"tools.call.x", result("a"), time.Minute, "not a cache key"},
		"wildcard":  {strings.Repeat("a", 63) + ">", result("a"), time.Minute, "not a cache key"},
		"too large": {k, huge, time.Minute, "over the server's limit"},
		"no callid": {k, &envelope.Result{Content: envelope.Text("a")}, time.Minute, "call_id"},
	} {
		err := s.Put(ctx, tc.key, tc.res, tc.ttl)
		if !errors.Is(err, rescache.ErrNotCacheable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Put = %v; want ErrNotCacheable naming %q", name, err, tc.want)
		}
	}
	if _, found, _ := s.Get(ctx, k); found {
		t.Fatal("a refused Put stored something")
	}
	if m.stores != 0 {
		t.Fatal("a refused Put was counted as stored")
	}
}

// TestNotRunning: before Start and after Stop, Get and Put say so.
func TestNotRunning(t *testing.T) {
	srv := natstest.Start(t)
	j, _ := js.New(natstest.Connect(t, srv.ClientURL()))
	s, err := rescache.New(rescache.Config{JS: j})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if _, ok := s.Key(searchCall("", `{}`)); ok {
		t.Fatal("Key before Start: a Store not started caches nothing")
	}
	k := strings.Repeat("a", rescache.KeyLen)
	if _, _, err := s.Get(ctx, k); !errors.Is(err, rescache.ErrNotRunning) {
		t.Fatalf("Get before Start: %v", err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if k, _ = s.Key(searchCall("", `{}`)); k == "" {
		t.Fatal("no key from a started Store")
	}
	if err := s.Put(ctx, k, result("a"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, k, result("a"), time.Minute); !errors.Is(err, rescache.ErrNotRunning) {
		t.Fatalf("Put after Stop: %v", err)
	}
}

func TestConfig(t *testing.T) {
	srv := natstest.Start(t)
	j, _ := js.New(natstest.Connect(t, srv.ClientURL()))
	for _, tc := range []struct {
		cfg  rescache.Config
		want string
	}{
		{rescache.Config{}, "Config.JS"},
		{rescache.Config{JS: j, Bucket: "a.b"}, "Config.Bucket"},
		{rescache.Config{JS: j, Bucket: "a>"}, "Config.Bucket"},
		{rescache.Config{JS: j, MaxBytes: 1000}, "Config.MaxBytes"},
		{rescache.Config{JS: j, Replicas: 7}, "Config.Replicas"},
	} {
		if _, err := rescache.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v; want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}

// TestBucket: Start creates the bucket a KV client can read (one message
// per key, per-message TTLs, the oldest dropped when full), a second
// replica's Start changes nothing, and a bucket made before (without
// TTLs) is brought to this configuration.
func TestBucket(t *testing.T) {
	srv := natstest.Start(t)
	ctx := ctxT(t)
	j, _ := js.New(natstest.Connect(t, srv.ClientURL()))
	// an old bucket without per-message TTLs
	if _, err := j.CreateKeyValue(ctx, js.KeyValueConfig{Bucket: rescache.BucketDefault}); err != nil {
		t.Fatal(err)
	}
	a := replica(t, srv.ClientURL(), rescache.Config{MaxBytes: 64 << 20})
	_ = replica(t, srv.ClientURL(), rescache.Config{MaxBytes: 64 << 20})
	st, err := j.Stream(ctx, "KV_"+rescache.BucketDefault)
	if err != nil {
		t.Fatal(err)
	}
	c := st.CachedInfo().Config
	if !c.AllowMsgTTL || c.Discard != js.DiscardOld || c.MaxMsgsPerSubject != 1 || c.MaxBytes != 64<<20 || !c.AllowDirect || c.MaxAge != rescache.TTLMax {
		t.Fatalf("the bucket's stream: %+v", c)
	}
	k, _ := a.Key(searchCall("acme", `{"q":"kv"}`))
	if err := a.Put(ctx, k, result("via kv"), time.Minute); err != nil {
		t.Fatal(err)
	}
	kv, err := j.KeyValue(ctx, rescache.BucketDefault)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	res, err := envelope.DecodeResult(e.Value())
	if err != nil || res.Content.Text() != "via kv" {
		t.Fatalf("the KV value: %+v, %v", res, err)
	}
}

// TestConcurrent: replicas storing and reading the same keys at once
// (run with -race).
func TestConcurrent(t *testing.T) {
	srv := natstest.Start(t)
	a := replica(t, srv.ClientURL(), rescache.Config{})
	b := replica(t, srv.ClientURL(), rescache.Config{})
	ctx := ctxT(t)
	res := result("shared") // one result stored by all: Put must not write to it
	var wg sync.WaitGroup
	for i := range 8 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for n := range 20 {
				k, _ := s.Key(searchCall("acme", `{"n":`+string(rune('0'+n%10))+`}`))
				if err := s.Put(ctx, k, res, time.Minute); err != nil {
					t.Error(err)
					return
				}
				if _, found, err := s.Get(ctx, k); !found || err != nil {
					t.Errorf("Get after Put: %v, %v", found, err)
					return
				}
				_ = res.Content.Text()
			}
		})
	}
	wg.Wait()
}

// countMetrics counts what the store reports.
type countMetrics struct {
	mu      sync.Mutex
	stored  map[string]int
	stores  int
	failed  map[string]int
	lookups int
	hits    int
}

func (m *countMetrics) Stored(tool string, size int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stored == nil {
		m.stored = map[string]int{}
	}
	m.stored[tool]++
	m.stores += size
}

func (m *countMetrics) Failed(op string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed == nil {
		m.failed = map[string]int{}
	}
	m.failed[op]++
}

func (m *countMetrics) Lookup(_ time.Duration, found bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lookups++
	if found {
		m.hits++
	}
}

// TestUnreadableEntry: an entry that is not a result (written by someone
// else) is an error and a miss, counted as a failed get; one that is an
// is_error result is a miss.
func TestUnreadableEntry(t *testing.T) {
	srv := natstest.Start(t)
	m := &countMetrics{}
	s := replica(t, srv.ClientURL(), rescache.Config{Metrics: m})
	ctx := ctxT(t)
	bad, _ := s.Key(searchCall("", `{"q":"bad"}`))
	failed, _ := s.Key(searchCall("", `{"q":"failed"}`))
	j, _ := js.New(natstest.Connect(t, srv.ClientURL()))
	if _, err := j.Publish(ctx, "$KV."+rescache.BucketDefault+"."+bad, []byte("not json")); err != nil {
		t.Fatal(err)
	}
	errRes, _ := envelope.EncodeResult(&envelope.Result{CallID: "x", IsError: true, Content: envelope.Text("boom")})
	if _, err := j.Publish(ctx, "$KV."+rescache.BucketDefault+"."+failed, errRes); err != nil {
		t.Fatal(err)
	}
	if _, found, err := s.Get(ctx, bad); found || err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("an unreadable entry: %v, %v", found, err)
	}
	if _, found, err := s.Get(ctx, failed); found || err != nil {
		t.Fatalf("an is_error entry: %v, %v", found, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed["get"] != 1 {
		t.Fatalf("failed gets: %v", m.failed)
	}
}
