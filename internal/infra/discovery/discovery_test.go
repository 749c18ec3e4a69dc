package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitLong bounds every wait for something that should happen.
const waitLong = 30 * time.Second

// testTTL is the bucket TTL of these tests: short, so expiry is quick.
const testTTL = time.Second

func registry(t *testing.T, names ...string) *tools.Registry {
	t.Helper()
	reg := tools.NewRegistry()
	for _, name := range names {
		reg.MustRegister(tools.Tool{
			Name:        name,
			Description: "The " + name + " tool.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
			Timeout:     7 * time.Second,
			Handler: func(context.Context, json.RawMessage) (tools.Output, error) {
				return tools.Text(name), nil
			},
		})
	}
	return reg
}

// connect opens a JetStream context on a connection of its own (one per
// simulated process), closed when the test ends.
func connect(t testing.TB, url string) js.JetStream {
	t.Helper()
	j, err := js.New(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func announce(t *testing.T, j js.JetStream, workerID string, reg *tools.Registry) *Announcer {
	t.Helper()
	return announceWith(t, AnnouncerConfig{JetStream: j, Registry: reg, WorkerID: workerID})
}

// announceWith starts an announcer of cfg, with the tests' bucket and
// logger, stopped when the test ends.
func announceWith(t *testing.T, cfg AnnouncerConfig) *Announcer {
	t.Helper()
	cfg.Bucket, cfg.Logger = BucketConfig{TTL: testTTL}, natstest.Logger(t)
	a, err := NewAnnouncer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	return a
}

func newCatalog(t *testing.T, j js.JetStream) *Catalog {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	c, err := NewCatalog(CatalogConfig{JetStream: j, Bucket: BucketConfig{TTL: testTTL}, Logger: natstest.Logger(t)})
	if err == nil {
		err = c.Start(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// eventually polls cond until it holds or waitLong passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	natstest.Eventually(t, waitLong, what, cond)
}

func workerIDs(as []Announcement) []string {
	var ids []string
	for _, a := range as {
		ids = append(ids, a.WorkerID)
	}
	return ids
}

// TestTwoWorkersOneTool: two workers announcing the same tool give one
// definition and two workers; a tool of one of them only is listed too.
func TestTwoWorkersOneTool(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	announce(t, connect(t, srv.ClientURL()), "worker-a", registry(t, "search", "fetch"))
	announce(t, connect(t, srv.ClientURL()), "host.example.com-42-b", registry(t, "search"))
	c := newCatalog(t, connect(t, srv.ClientURL()))
	ctx := t.Context()

	if got := c.Names(ctx); !slices.Equal(got, []string{"fetch", "search"}) {
		t.Errorf("Names = %v", got)
	}
	defs := c.Definitions(ctx)
	if len(defs) != 2 || defs[1].Name != "search" || defs[1].Description != "The search tool." ||
		string(defs[1].InputSchema) != `{"type":"object","properties":{"q":{"type":"string"}}}` {
		t.Errorf("Definitions = %+v", defs)
	}
	ws := c.Workers(ctx, "search")
	if got := workerIDs(ws); !slices.Equal(got, []string{"host.example.com-42-b", "worker-a"}) {
		t.Errorf("workers of search: %v", got)
	}
	if ws[0].Timeout != 7*time.Second || ws[0].MaxAttempts != 3 || ws[0].StartedAt.IsZero() {
		t.Errorf("announcement %+v", ws[0])
	}
	if got := workerIDs(c.Workers(ctx, "fetch")); !slices.Equal(got, []string{"worker-a"}) {
		t.Errorf("workers of fetch: %v", got)
	}
	if info, ok := c.Lookup(ctx, "search"); !ok || info.Name != "search" || info.NoWorker {
		t.Errorf("Lookup(search) = %+v, %v", info, ok)
	}
	if info, ok := c.Lookup(ctx, "nope"); ok || info.NoWorker {
		t.Errorf("Lookup(nope) = %+v, %v", info, ok)
	}
}

// TestCleanStopWithdraws: a worker that stops cleanly is gone at once, and
// its tool then counts as known but unserved.
func TestCleanStopWithdraws(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	// A TTL longer than the test: only the withdrawal removes the tool.
	if _, _, err := OpenBucket(t.Context(), connect(t, srv.ClientURL()), BucketConfig{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	c := newCatalog(t, connect(t, srv.ClientURL()))
	a := announce(t, connect(t, srv.ClientURL()), "w1", registry(t, "search"))
	ctx := t.Context()
	eventually(t, "search announced", func() bool { _, ok := c.Lookup(ctx, "search"); return ok })

	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "search withdrawn", func() bool { return len(c.Names(ctx)) == 0 })
	if info, ok := c.Lookup(ctx, "search"); ok || !info.NoWorker {
		t.Errorf("Lookup(search) after stop = %+v, %v; want known with no worker", info, ok)
	}
	if err := a.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestKilledWorkerExpires: a worker whose connection dies without a clean
// stop disappears once its announcement's TTL has passed, and a new catalog
// (started later) does not see it either.
func TestKilledWorkerExpires(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	c := newCatalog(t, connect(t, srv.ClientURL()))
	wnc := natstest.Connect(t, srv.ClientURL())
	wjs, err := js.New(wnc)
	if err != nil {
		t.Fatal(err)
	}
	announce(t, wjs, "doomed", registry(t, "search"))
	announce(t, connect(t, srv.ClientURL()), "survivor", registry(t, "fetch"))
	ctx := t.Context()
	eventually(t, "both announced", func() bool { return len(c.Names(ctx)) == 2 })

	killed := time.Now()
	wnc.Close() // the worker dies: no more heartbeats, no withdrawal
	eventually(t, "the dead worker's tool to expire", func() bool {
		return slices.Equal(c.Names(ctx), []string{"fetch"})
	})
	if gone := time.Since(killed); gone < testTTL/2 {
		t.Errorf("the tool vanished %v after the kill, before its TTL (%v) could pass", gone, testTTL)
	}
	// The survivor keeps heartbeating past several TTLs: one more than the
	// dead worker's expiry took (a survivor that did not heartbeat would
	// have expired with it).
	time.Sleep(testTTL)
	if got := c.Names(ctx); !slices.Equal(got, []string{"fetch"}) {
		t.Errorf("after 2 TTLs: %v", got)
	}
	c2 := newCatalog(t, connect(t, srv.ClientURL()))
	if got := c2.Names(ctx); !slices.Equal(got, []string{"fetch"}) {
		t.Errorf("a new catalog sees %v", got)
	}
}

// TestDispatcherNoLiveWorker: through a dispatcher using the discovery
// catalog, a tool with a consumer but no live worker is answered at once
// with "no worker serves", an unknown tool with the list of live tools.
func TestDispatcherNoLiveWorker(t *testing.T) {
	t.Parallel()
	srv, _, j := natstest.StartProvisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	// "orphan" has a consumer (a worker served it once) but no live worker.
	if _, err := j.CreateOrUpdateConsumer(ctx, "TOOL_CALLS", js.ConsumerConfig{
		Durable: "tool_orphan", FilterSubject: "tools.call.orphan", AckPolicy: js.AckExplicitPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	announce(t, connect(t, srv.ClientURL()), "w1", registry(t, "search"))
	c := newCatalog(t, j)
	d, err := dispatch.New(dispatch.Config{JS: j, Catalog: c, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { stopped, stop := context.WithCancel(context.Background()); stop(); _ = d.Stop(stopped) }()
	res, err := d.Dispatch(ctx, "", []envelope.ToolUseBlock{
		{Type: "tool_use", ID: "toolu_1", Name: "orphan", Input: json.RawMessage(`{}`)},
		{Type: "tool_use", ID: "toolu_2", Name: "nothing", Input: json.RawMessage(`{}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[0]; !r.IsError || r.Code != dispatch.CodeNoWorker || !strings.HasPrefix(r.Content.Text(), "No worker serves the tool orphan right now") ||
		!strings.Contains(r.Content.Text(), "Tools available now: search.") {
		t.Errorf("orphan: %+v %q", r, r.Content.Text())
	}
	if r := res[1]; !r.IsError || r.Code != "unknown_tool" || !strings.Contains(r.Content.Text(), "Available tools: search.") {
		t.Errorf("unknown: %+v %q", r, r.Content.Text())
	}
}

func TestKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ tool, worker, want string }{
		{"search", "w1", "search.w1"},
		{"search", "host.example.com-12-abc", "search.host_example_com-12-abc"},
		{"a-b_c", "we ird/id*>", "a-b_c.we_ird_id__"},
		{"x", "", "x._"},
	} {
		if got := Key(tc.tool, tc.worker); got != tc.want {
			t.Errorf("Key(%q, %q) = %q, want %q", tc.tool, tc.worker, got, tc.want)
		}
		if tool, ok := splitKey(Key(tc.tool, tc.worker)); !ok || tool != tc.tool {
			t.Errorf("splitKey(Key(%q, …)) = %q, %v", tc.tool, tool, ok)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	reg := registry(t, "search")
	for _, tc := range []struct {
		cfg  AnnouncerConfig
		want string
	}{
		{AnnouncerConfig{Registry: reg, WorkerID: "w"}, "JetStream is required"},
		{AnnouncerConfig{JetStream: fakeJS{}, WorkerID: "w"}, "Registry is required"},
		{AnnouncerConfig{JetStream: fakeJS{}, Registry: reg}, "WorkerID is required"},
		{AnnouncerConfig{JetStream: fakeJS{}, Registry: reg, WorkerID: "w", Tools: []string{"nope"}}, `names "nope"`},
		{AnnouncerConfig{JetStream: fakeJS{}, Registry: reg, WorkerID: "w", Bucket: BucketConfig{TTL: time.Millisecond}}, "TTL must be at least 1s"},
	} {
		if _, err := NewAnnouncer(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewAnnouncer: %v, want an error containing %q", err, tc.want)
		}
	}
	// An empty registry is not an error: its tools come later (Add), as
	// for a worker whose MCP servers are not up yet.
	if _, err := NewAnnouncer(AnnouncerConfig{JetStream: fakeJS{}, Registry: tools.NewRegistry(), WorkerID: "w"}); err != nil {
		t.Errorf("NewAnnouncer with an empty registry: %v; want none", err)
	}
}

// fakeJS stands in where only a non-nil JetStream is needed.
type fakeJS struct{ js.JetStream }

// TestOpenBucket: the bucket is made with the TTL as its max age and expiry
// markers; an existing bucket's TTL wins over the one asked for.
func TestOpenBucket(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	j := connect(t, srv.ClientURL())
	ctx := t.Context()
	kv, ttl, err := OpenBucket(ctx, j, BucketConfig{TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ttl != 3*time.Second || st.TTL() != 3*time.Second || st.LimitMarkerTTL() != 3*time.Second || st.Bucket() != BucketDefault {
		t.Errorf("bucket %s: ttl %v, max age %v, marker ttl %v", st.Bucket(), ttl, st.TTL(), st.LimitMarkerTTL())
	}
	if _, ttl, err = OpenBucket(ctx, j, BucketConfig{TTL: time.Minute}); err != nil || ttl != 3*time.Second {
		t.Errorf("reopened with another TTL: %v, %v; want the bucket's 3s", ttl, err)
	}
}

// TestStartWhileJetStreamUnavailable: a worker that cannot announce at start
// because JetStream does not answer in time (here: a start context already
// over) starts anyway, and its heartbeat announces the tools once it can.
func TestStartWhileJetStreamUnavailable(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	c := newCatalog(t, connect(t, srv.ClientURL()))
	a, err := NewAnnouncer(AnnouncerConfig{
		JetStream: connect(t, srv.ClientURL()), Registry: registry(t, "late"), WorkerID: "w-late",
		Bucket: BucketConfig{TTL: testTTL}, Logger: natstest.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if err := a.Start(ctx); err != nil {
		t.Fatalf("Start with JetStream unavailable = %v, want nil (the heartbeat retries)", err)
	}
	eventually(t, "late announced by the heartbeat", func() bool {
		info, ok := c.Lookup(t.Context(), "late")
		return ok && !info.NoWorker
	})
	if err := a.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "late withdrawn", func() bool { return len(c.Names(t.Context())) == 0 })
}

// TestStartFailsOnLastingError: an error that will not pass by itself
// still fails Start: a bucket with three replicas on a single server.
func TestStartFailsOnLastingError(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	a, err := NewAnnouncer(AnnouncerConfig{
		JetStream: connect(t, srv.ClientURL()), Registry: registry(t, "x"), WorkerID: "w",
		Bucket: BucketConfig{TTL: testTTL, Replicas: 3}, Logger: natstest.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err == nil {
		_ = a.Stop(t.Context())
		t.Fatal("Start of a bucket the server cannot place = nil, want the error")
	}
}

// A Start cancelled halfway (a signal during a worker's start-up) takes
// back the announcements it had already written: nobody counts a worker
// that is not there, even with a TTL longer than the test.
func TestStartCancelledHalfwayWithdraws(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	j := connect(t, srv.ClientURL())
	kv, _, err := OpenBucket(t.Context(), j, BucketConfig{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range 200 {
		names = append(names, fmt.Sprintf("tool%03d", i))
	}
	reg := registry(t, names...)
	// Cancel Start at its first announcement; 200 announcements written one
	// after the other leave it time to notice only rarely, so try a few
	// worker ids until one is cut off halfway.
	for attempt := range 5 {
		w, err := kv.WatchAll(t.Context(), js.UpdatesOnly())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			for e := range w.Updates() {
				if e != nil && e.Operation() == js.KeyValuePut {
					cancel()
					return
				}
			}
		}()
		a, err := NewAnnouncer(AnnouncerConfig{
			JetStream: j, Registry: reg, WorkerID: fmt.Sprintf("w%d", attempt),
			Bucket: BucketConfig{TTL: time.Hour}, Logger: natstest.Logger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		startErr := a.Start(ctx)
		cancel()
		_ = w.Stop()
		if startErr == nil { // all written before the cancel: withdraw, try again
			if err := a.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
			continue
		}
		lister, err := kv.ListKeys(t.Context())
		if err != nil && !errors.Is(err, js.ErrNoKeysFound) {
			t.Fatal(err)
		}
		var left []string
		if lister != nil {
			for k := range lister.Keys() {
				left = append(left, k)
			}
		}
		if len(left) != 0 {
			t.Fatalf("Start failed (%v) and left %d announcements behind: %v", startErr, len(left), left[:min(len(left), 5)])
		}
		return
	}
	t.Fatal("Start was never cut off halfway in 5 tries")
}

// probingCatalog is newCatalog with quick liveness probes and a bucket
// TTL longer than the test: only a probe or a withdrawal removes a tool.
func probingCatalog(t *testing.T, j js.JetStream, goneAfter time.Duration) *Catalog {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	c, err := NewCatalog(CatalogConfig{
		JetStream: j, Bucket: BucketConfig{TTL: time.Hour}, Logger: natstest.Logger(t),
		ProbeInterval: 50 * time.Millisecond, GoneAfter: goneAfter,
	})
	if err == nil {
		err = c.Start(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// TestDeadConnectionNoticedBeforeTTL: a worker whose NATS connection is
// gone (a kill -9 closes it) stops counting once its liveness subject has
// had no subscriber for GoneAfter, long before its announcement's TTL; a
// call to its tool is then answered with no_worker. A worker whose
// connection stays keeps counting however long the probes go on.
func TestDeadConnectionNoticedBeforeTTL(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	if _, _, err := OpenBucket(t.Context(), connect(t, srv.ClientURL()), BucketConfig{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	const goneAfter = 300 * time.Millisecond
	c := probingCatalog(t, connect(t, srv.ClientURL()), goneAfter)
	wnc := natstest.Connect(t, srv.ClientURL())
	wjs, err := js.New(wnc)
	if err != nil {
		t.Fatal(err)
	}
	doomed := announce(t, wjs, "doomed", registry(t, "search"))
	announce(t, connect(t, srv.ClientURL()), "survivor", registry(t, "fetch"))
	ctx := t.Context()
	eventually(t, "both announced", func() bool { return len(c.Names(ctx)) == 2 })
	if ws := c.Workers(ctx, "search"); len(ws) != 1 || !strings.HasPrefix(ws[0].Liveness, LivenessPrefix) {
		t.Fatalf("search's workers %+v: want one with a liveness subject", ws)
	}
	// Many probes (about 24, one each 50 ms) over several GoneAfter, all
	// answered: nobody is dropped.
	time.Sleep(4 * goneAfter)
	if got := c.Names(ctx); !slices.Equal(got, []string{"fetch", "search"}) {
		t.Fatalf("live workers dropped: %v", got)
	}

	wnc.Close() // the worker dies: its subscription goes with its connection
	eventually(t, "the dead worker no longer counted", func() bool {
		return slices.Equal(c.Names(ctx), []string{"fetch"})
	})
	if info, ok := c.Lookup(ctx, "search"); ok || !info.NoWorker {
		t.Errorf("Lookup(search) = %+v, %v; want known with no worker", info, ok)
	}
	if got := workerIDs(c.Workers(ctx, "search")); len(got) != 0 {
		t.Errorf("search still served by %v", got)
	}
	// The announcement is still in the bucket (TTL an hour): only the probe
	// tells.
	kv, _, err := OpenBucket(ctx, connect(t, srv.ClientURL()), BucketConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, Key("search", "doomed")); err != nil {
		t.Errorf("the announcement is not in the bucket any more (%v): the test does not test the probe", err)
	}
	_ = doomed.Stop(ctx) // its connection is closed: nothing to withdraw with
}

// TestLivenessSubjectChecked: an announcement is message data; one whose
// liveness subject is not LivenessPrefix and one plain token is not probed
// (it counts until its TTL), so nothing another subject names is published
// to.
func TestLivenessSubjectChecked(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		LivenessPrefix + "abc_DEF-123",
	} {
		if !validLiveness(s) {
			t.Errorf("validLiveness(%q) = false", s)
		}
	}
	for _, s := range []string{
		"", LivenessPrefix, "tools.call.echo", LivenessPrefix + "a.b", LivenessPrefix + "*", LivenessPrefix + ">",
		LivenessPrefix + "a b", LivenessPrefix + strings.Repeat("x", 65), "x" + LivenessPrefix + "a",
	} {
		if validLiveness(s) {
			t.Errorf("validLiveness(%q) = true", s)
		}
	}

	srv := natstest.Start(t)
	j := connect(t, srv.ClientURL())
	kv, _, err := OpenBucket(t.Context(), j, BucketConfig{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := registry(t, "search").Lookup("search")
	ann := AnnouncementOf(rt, "w1", time.Now())
	if ann.Version == "" || ann.Version != BuildVersion() {
		t.Errorf("announcement version %q, want the build's %q", ann.Version, BuildVersion())
	}
	ann.Liveness = "tools.call.search" // no subscriber: a probe would say "gone"
	data, err := json.Marshal(ann)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), Key("search", "w1"), data); err != nil {
		t.Fatal(err)
	}
	const goneAfter = 100 * time.Millisecond
	c := probingCatalog(t, connect(t, srv.ClientURL()), goneAfter)
	time.Sleep(10 * goneAfter)
	if got := c.Names(t.Context()); !slices.Equal(got, []string{"search"}) {
		t.Errorf("Names = %v: an announcement with a bad liveness subject was probed", got)
	}
}

// TestLivenessRefusedFallsBackToTTL: a worker the server does not allow to
// subscribe to its liveness subject (an older accounts file) announces
// none, so no catalog takes the missing subscriber for a dead worker.
func TestLivenessRefusedFallsBackToTTL(t *testing.T) {
	t.Parallel()
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
		Users: []*server.User{
			{Username: "worker", Password: "w", Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: []string{">"}},
				Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
			}},
			{Username: "orchestrator", Password: "o"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(waitLong) {
		t.Fatal("server not ready")
	}
	url := func(user, pass string) string {
		return "nats://" + user + ":" + pass + "@" + srv.Addr().String()
	}
	c := probingCatalog(t, connect(t, url("orchestrator", "o")), 100*time.Millisecond)
	announce(t, connect(t, url("worker", "w")), "old-perms", registry(t, "search"))
	ctx := t.Context()
	eventually(t, "search announced", func() bool { _, ok := c.Lookup(ctx, "search"); return ok })
	if ws := c.Workers(ctx, "search"); len(ws) != 1 || ws[0].Liveness != "" {
		t.Fatalf("workers %+v: want one without a liveness subject", ws)
	}
	time.Sleep(time.Second) // ten GoneAfters
	if _, ok := c.Lookup(ctx, "search"); !ok {
		t.Error("a worker without a liveness subject was dropped")
	}
}

// TestServerRestartKeepsWorkers: a restart of the server cuts every
// connection; a worker that reconnects later than the catalog (its
// reconnect wait is longer) keeps counting, because the catalog's clock
// for a silent liveness subject starts only once it is back itself.
func TestServerRestartKeepsWorkers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := func(listen string) *embedded.Server {
		srv, err := embedded.Start(embedded.Options{Listen: listen, DataDir: dir, Logger: natstest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	srv := start("127.0.0.1:0")
	// The server running when the test ends is shut down after the
	// catalog and the worker's connection: the catalog stops against a
	// live server, not into its timeouts.
	current := srv
	t.Cleanup(func() { current.Shutdown() })
	url := srv.ClientURL()
	if _, _, err := OpenBucket(t.Context(), connect(t, url), BucketConfig{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	c := probingCatalog(t, connect(t, url), GoneAfterDefault)
	wnc, err := jetstream.Connect(jetstream.ConnectOptions{
		URL: url, Name: "slow-reconnect", Logger: natstest.Logger(t),
		ReconnectWait: time.Second, ReconnectJitter: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wnc.Close)
	wjs, err := js.New(wnc)
	if err != nil {
		t.Fatal(err)
	}
	a := announce(t, wjs, "reconnecting", registry(t, "search"))
	ctx := t.Context()
	eventually(t, "search announced", func() bool { _, ok := c.Lookup(ctx, "search"); return ok })

	srv.Shutdown()
	current = start(strings.TrimPrefix(url, "nats://"))
	eventually(t, "the worker reconnected", wnc.IsConnected)
	// Past GoneAfter after both are back, the worker still counts (a clock
	// for its silence started no later than its reconnection).
	until := time.Now().Add(GoneAfterDefault + time.Second)
	for time.Now().Before(until) {
		if _, ok := c.Lookup(ctx, "search"); !ok {
			t.Fatal("a worker that reconnected after a server restart stopped counting")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = a.Stop(ctx) // while the second server runs
}

// TestSubscribeChanges: a subscriber hears when a worker starts serving a
// tool and when it stops, reads the new set with Tools (idempotent as
// announced), and its channel closes with cancel and with Stop.
func TestSubscribeChanges(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	if _, _, err := OpenBucket(t.Context(), connect(t, srv.ClientURL()), BucketConfig{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	c := newCatalog(t, connect(t, srv.ClientURL()))
	ctx := t.Context()
	changes, cancel := c.Subscribe()
	other, cancelOther := c.Subscribe()
	cancelOther()
	if _, ok := <-other; ok {
		t.Error("a cancelled subscription's channel is open")
	}
	waitChange := func(what string) {
		t.Helper()
		select {
		case _, ok := <-changes:
			if !ok {
				t.Fatalf("%s: channel closed", what)
			}
		case <-time.After(waitLong):
			t.Fatalf("%s: no change notified", what)
		}
	}

	reg := tools.NewRegistry()
	reg.MustRegister(tools.Tool{Name: "search", InputSchema: json.RawMessage(`{"type":"object"}`), Idempotent: true,
		Handler: func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text(""), nil }})
	a := announce(t, connect(t, srv.ClientURL()), "w1", reg)
	waitChange("worker started")
	got := c.Tools(ctx)
	if len(got) != 1 || got[0].Tool.Name != "search" || !got[0].Idempotent {
		t.Fatalf("Tools = %+v", got)
	}
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitChange("worker stopped")
	if got := c.Tools(ctx); len(got) != 0 {
		t.Errorf("Tools after the stop = %+v", got)
	}
	cancel()
	cancel()
	late, _ := c.Subscribe()
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-late; ok {
		t.Error("a subscription's channel is open after Stop")
	}
	if after, _ := c.Subscribe(); after != nil {
		if _, ok := <-after; ok {
			t.Error("Subscribe after Stop gave an open channel")
		}
	}
}
