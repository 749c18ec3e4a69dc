package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/fleet/tasks"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/budget"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/orchestrator/rescache"
	"github.com/toolpool/toolpool/internal/proctest"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// The accounts of jetstream/server/accounts.conf: a worker cannot publish
// calls, and a worker process started with credentials that may not bind
// the tool consumers stops at start, naming the subject it was refused.
func TestPermissions(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "120s")
	p := startPool(t, c) // R3 streams, provisioned as the orchestrator
	// The attempts bucket exists (the orchestrator creates it at start), so
	// the refused worker below fails on its consumer, not on the bucket.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := settle.OpenHistory(ctx, p.j, settle.HistoryConfig{Replicas: 3}); err != nil {
		t.Fatalf("create the attempts bucket: %v", err)
	}
	// Started now, checked by the last subtest: the request of its start
	// that is refused waits out the worker's start timeout (30 s) meanwhile.
	refusedWorker := startWorkerProc(t, c, "ops", opsPassword, "--demo-tools")

	t.Run("worker may not publish calls", func(t *testing.T) {
		violations := make(chan error, 4)
		nc, err := nats.Connect(c.urls(), nats.UserInfo("worker", workerPassword),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				select {
				case violations <- err:
				default:
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		subject := jetstream.CallSubject("echo")
		if err := nc.Publish(subject, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
		select {
		case err := <-violations:
			if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), subject) {
				t.Errorf("async error %q; want a permissions violation naming %s", err, subject)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no permissions violation reported for a worker publishing a call")
		}
		// and JetStream holds no call
		j, ctx := c.untilRefused(t, "worker", workerPassword, 10*time.Second)
		if _, err := j.Publish(ctx, subject, []byte(`{}`)); err == nil {
			t.Error("a worker's JetStream publish of a call was acknowledged")
		} else {
			t.Logf("a worker's JetStream publish of a call: %v (%v)", err, context.Cause(ctx))
		}
	})

	t.Run("liveness subjects are allowed", func(t *testing.T) {
		// The worker may subscribe to its liveness subject, the orchestrator
		// and ops may probe it: without that, a killed worker would count
		// until its announcements expire.
		w := startWorkerProc(t, c, "worker", workerPassword, "--demo-tools", "--id", "alive-check")
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		live, err := discovery.NewCatalog(discovery.CatalogConfig{JetStream: p.j, Logger: natstest.Logger(t)})
		if err == nil {
			err = live.Start(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer live.Stop(context.Background())
		var subject string
		natstest.Eventually(t, 90*time.Second, "the worker's announcement", func() bool {
			for _, a := range live.Workers(ctx, "echo") {
				if a.WorkerID == "alive-check" {
					subject = a.Liveness
					return true
				}
			}
			return false
		})
		if subject == "" {
			t.Fatalf("the worker announced no liveness subject (refused?):\n%s", w.Output())
		}
		for _, u := range []struct{ user, password string }{{"orchestrator", orchPassword}, {"ops", opsPassword}} {
			violations := make(chan error, 4)
			nc, err := nats.Connect(c.urls(), nats.UserInfo(u.user, u.password),
				nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
					select {
					case violations <- err:
					default:
					}
				}))
			if err != nil {
				t.Fatal(err)
			}
			// Someone subscribes and nothing answers: a timeout, neither "no
			// responders" nor a refusal.
			if _, err := nc.Request(subject, nil, 500*time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
				t.Errorf("%s probing a live worker: %v, want a timeout", u.user, err)
			}
			_ = nc.Flush()
			select {
			case err := <-violations:
				t.Errorf("%s may not probe liveness subjects: %v", u.user, err)
			default:
			}
			nc.Close()
		}
		w.Kill()
		natstest.Eventually(t, 60*time.Second, "the killed worker's liveness subject without subscriber", func() bool {
			_, err := p.j.Conn().Request(subject, nil, 500*time.Millisecond)
			return errors.Is(err, nats.ErrNoResponders)
		})
	})

	t.Run("stored results can be looked up and awaited by key", func(t *testing.T) {
		// A worker answers a redelivered call from its stored result, and an
		// orchestrator a re-posted one: both read TOOL_RESULTS by subject
		// tools.result.*.<key>; the orchestrator also subscribes to it.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		wj, err := js.New(c.connect(t, "worker", workerPassword))
		if err != nil {
			t.Fatal(err)
		}
		violations := make(chan error, 4)
		onc, err := nats.Connect(c.urls(), nats.UserInfo("orchestrator", orchPassword),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				select {
				case violations <- err:
				default:
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer onc.Close()
		oj, err := js.New(onc)
		if err != nil {
			t.Fatal(err)
		}
		stored := envelope.CallKey("", "", "call_perm_1", "echo", []byte(`{}`))
		later := envelope.CallKey("", "", "call_perm_2", "echo", []byte(`{}`))
		got := make(chan *nats.Msg, 1)
		sub, err := onc.ChanSubscribe(jetstream.ResultKeySubject(later), got)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := onc.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{stored, later} {
			if _, err := wj.Publish(ctx, jetstream.ResultSubject("orch-gone", key), []byte(`{"v":1,"call_id":"x"}`)); err != nil {
				t.Fatalf("worker publishes a result: %v", err)
			}
		}
		for user, j := range map[string]js.JetStream{"worker": wj, "orchestrator": oj} {
			s, err := j.Stream(ctx, jetstream.StreamResults)
			if err != nil {
				t.Fatalf("%s: stream %s: %v", user, jetstream.StreamResults, err)
			}
			m, err := jetstream.LastResult(ctx, s, stored)
			if err != nil || m.Subject != jetstream.ResultSubject("orch-gone", stored) {
				t.Errorf("%s: stored result look-up = %v; want the result on %s", user, err, jetstream.ResultSubject("orch-gone", stored))
			}
		}
		select {
		case m := <-got:
			if m.Subject != jetstream.ResultSubject("orch-gone", later) {
				t.Errorf("orchestrator subscription got %s", m.Subject)
			}
		case err := <-violations:
			t.Errorf("orchestrator subscription to %s: %v", jetstream.ResultKeySubject(later), err)
		case <-time.After(20 * time.Second):
			t.Error("the orchestrator's subscription to a result key saw nothing")
		}
	})

	t.Run("orchestrator keeps the fleet's shared state; a worker may not read it", func(t *testing.T) {
		// The MCP session key (toolpool_mcp) and the durable tasks
		// (toolpool_tasks) are opened by every orchestrator at start: with
		// a permission missing, sessions would stay replica-local and the
		// orchestrator would not start.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		oj, err := js.New(c.connect(t, "orchestrator", orchPassword))
		if err != nil {
			t.Fatal(err)
		}
		// As internal/orchhost opens it: look it up, create it if missing.
		kv, err := oj.KeyValue(ctx, "toolpool_mcp")
		if errors.Is(err, js.ErrBucketNotFound) {
			kv, err = oj.CreateKeyValue(ctx, js.KeyValueConfig{Bucket: "toolpool_mcp", History: 1, Replicas: 3})
		}
		if err != nil {
			t.Fatalf("orchestrator creates the MCP bucket: %v", err)
		}
		if _, err := kv.Create(ctx, "session_key", []byte("k")); err != nil && !errors.Is(err, js.ErrKeyExists) {
			t.Fatalf("orchestrator creates the session key: %v", err)
		}
		// a follower that has not applied the Create yet may answer: not
		// found for a moment; a refusal fails at once
		for {
			_, err := kv.Get(ctx, "session_key")
			if err == nil {
				break
			}
			if !errors.Is(err, js.ErrKeyNotFound) || ctx.Err() != nil {
				t.Fatalf("orchestrator reads the session key: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		store, err := tasks.Open(ctx, oj, tasks.Config{Dispatcher: p.d, Instance: "perm", Replicas: 3})
		if err != nil {
			t.Fatalf("orchestrator opens the tasks bucket: %v", err)
		}
		defer func() { _ = store.Stop(context.Background()) }()
		// The result cache (toolpool_cache): created, stored to and read
		// by the orchestrator.
		cache, err := rescache.New(rescache.Config{JS: oj, Replicas: 3})
		if err == nil {
			err = cache.Start(ctx)
		}
		if err != nil {
			t.Fatalf("orchestrator opens the result cache: %v", err)
		}
		defer func() { _ = cache.Stop(context.Background()) }()
		key, _ := cache.Key(&policy.Call{Tool: "echo", Input: json.RawMessage(`{"text":"perm"}`)})
		if err := cache.Put(ctx, key, &envelope.Result{CallID: "c1", Tool: "echo", Content: envelope.Text("perm")}, time.Minute); err != nil {
			t.Fatalf("orchestrator stores a result: %v", err)
		}
		// Any of the three replicas answers the direct get, a follower
		// that has not applied the Put yet included: a miss for a moment
		// is what the cache allows (rescache's doc); a refusal is not.
		for found := false; !found; {
			var err error
			if _, found, err = cache.Get(ctx, key); err != nil || (!found && ctx.Err() != nil) {
				t.Fatalf("orchestrator reads a cached result: %v, %v", found, err)
			}
			if !found {
				time.Sleep(20 * time.Millisecond)
			}
		}
		// coalescing: a claim, released after its result is stored, and
		// a caller awaiting it
		key2, _ := cache.Key(&policy.Call{Tool: "echo", Input: json.RawMessage(`{"text":"claimed"}`)})
		if ok, err := cache.Claim(ctx, key2, time.Minute); !ok || err != nil {
			t.Fatalf("orchestrator claims a run: %v, %v", ok, err)
		}
		awaited := make(chan error, 1)
		go func() {
			_, ok, err := cache.Await(ctx, key2)
			if err == nil && !ok {
				err = errors.New("no result")
			}
			awaited <- err
		}()
		if err := cache.Put(ctx, key2, &envelope.Result{CallID: "c2", Tool: "echo", Content: envelope.Text("claimed")}, time.Minute); err != nil {
			t.Fatalf("orchestrator stores a claimed run's result: %v", err)
		}
		cache.Release(ctx, key2, nil)
		if err := <-awaited; err != nil {
			t.Fatalf("orchestrator awaits a claimed run: %v", err)
		}
		// one connection per refusal (untilRefused)
		wj, short := c.untilRefused(t, "worker", workerPassword, 10*time.Second)
		if wkv, err := wj.KeyValue(short, "toolpool_mcp"); err == nil {
			if _, err := wkv.Get(short, "session_key"); err == nil {
				t.Error("a worker read the MCP session key")
			}
		}
		wj, short = c.untilRefused(t, "worker", workerPassword, 10*time.Second)
		if wkv, err := wj.KeyValue(short, "toolpool_cache"); err == nil {
			if _, err := wkv.Get(short, key); err == nil {
				t.Error("a worker read the result cache")
			}
		}
	})

	t.Run("orchestrators share the repeated-failure counts", func(t *testing.T) {
		// Every orchestrator publishes and subscribes to the advice subject;
		// a worker may publish on it no more than it may subscribe.
		listener, lv := connectWatched(t, c, "orchestrator", orchPassword)
		got := make(chan *nats.Msg, 4)
		if _, err := listener.ChanSubscribe(jetstream.AdviceSubject, got); err != nil {
			t.Fatal(err)
		}
		if err := listener.Flush(); err != nil {
			t.Fatal(err)
		}
		teller, tv := connectWatched(t, c, "orchestrator", orchPassword)
		if err := teller.Publish(jetstream.AdviceSubject, []byte("orchestrator")); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-got:
			if string(m.Data) != "orchestrator" {
				t.Errorf("got %q", m.Data)
			}
		case err := <-lv:
			t.Fatalf("orchestrator subscribing to %s: %v", jetstream.AdviceSubject, err)
		case err := <-tv:
			t.Fatalf("orchestrator publishing on %s: %v", jetstream.AdviceSubject, err)
		case <-time.After(20 * time.Second):
			t.Fatal("an orchestrator's message on the advice subject did not reach another orchestrator")
		}
		w, wv := connectWatched(t, c, "worker", workerPassword)
		if err := w.Publish(jetstream.AdviceSubject, []byte("worker")); err != nil {
			t.Fatal(err)
		}
		_ = w.Flush()
		select {
		case err := <-wv:
			if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), jetstream.AdviceSubject) {
				t.Errorf("async error %q; want a permissions violation naming %s", err, jetstream.AdviceSubject)
			}
		case m := <-got:
			t.Errorf("a worker's message reached the orchestrators: %q", m.Data)
		case <-time.After(30 * time.Second):
			t.Error("no permissions violation reported for a worker publishing on the advice subject")
		}
	})

	t.Run("orchestrators ask each other for their schedulers' snapshots", func(t *testing.T) {
		// status --by-key, the console's overview and the backlog ask every
		// orchestrator on toolpool.sched.stats and gather the answers: the
		// request is a publish by an orchestrator, the answer one to its
		// inbox. (The publish was refused before, and each replica showed
		// only its own scheduler.)
		answering, av := connectWatched(t, c, "orchestrator", orchPassword)
		if _, err := answering.Subscribe(jetstream.SchedStatsSubject, func(m *nats.Msg) { _ = m.Respond([]byte("snapshot")) }); err != nil {
			t.Fatal(err)
		}
		if err := answering.Flush(); err != nil {
			t.Fatal(err)
		}
		asking, qv := connectWatched(t, c, "orchestrator", orchPassword)
		// The pool's own orchestrators answer too: the answer looked for
		// is this test's.
		inbox := asking.NewRespInbox()
		answers := make(chan *nats.Msg, 16)
		if _, err := asking.ChanSubscribe(inbox, answers); err != nil {
			t.Fatal(err)
		}
		if err := asking.PublishRequest(jetstream.SchedStatsSubject, inbox, nil); err != nil {
			t.Fatal(err)
		}
		timeout := time.After(20 * time.Second)
		for {
			select {
			case v := <-qv:
				t.Fatalf("an orchestrator asking on %s: %v", jetstream.SchedStatsSubject, v)
			case v := <-av:
				t.Fatalf("an orchestrator answering on %s: %v", jetstream.SchedStatsSubject, v)
			case m := <-answers:
				if string(m.Data) == "snapshot" {
					return
				}
			case <-timeout:
				t.Fatalf("an orchestrator's request on %s got no answer from another orchestrator", jetstream.SchedStatsSubject)
			}
		}
	})

	t.Run("budgets: ops define and reset them, orchestrators spend, a worker may not", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		oj, err := js.New(c.connect(t, "orchestrator", orchPassword))
		if err != nil {
			t.Fatal(err)
		}
		// as an orchestrator starts it: creates the bucket and the counter
		// stream, watches the definitions
		store, err := budget.New(budget.Config{JS: oj, Logger: natstest.Logger(t), Replicas: 3})
		if err == nil {
			err = store.Start(ctx)
		}
		if err != nil {
			t.Fatalf("orchestrator starts the budgets: %v", err)
		}
		defer func() { _ = store.Stop(context.Background()) }()
		opsJ, err := js.New(c.connect(t, "ops", opsPassword))
		if err != nil {
			t.Fatal(err)
		}
		def := budget.Def{Name: "perm.check", Tenant: "acme", Period: budget.Day, Limit: 2}
		if err := budget.Set(ctx, opsJ, def); err != nil {
			t.Fatalf("ops sets a budget: %v", err)
		}
		natstest.Eventually(t, 30*time.Second, "the orchestrator learns of the budget", func() bool { return store.Active("acme", "") })
		call := &policy.Call{Tenant: "acme", Tool: "echo"}
		for i := range 3 {
			_, err := store.Charge(ctx, call)
			var ex *policy.Exhausted
			if i < 2 && err != nil || i == 2 && !errors.As(err, &ex) {
				t.Fatalf("orchestrator charge %d: %v", i+1, err)
			}
		}
		// The refused third charge was added and taken back: a replica
		// of the counters that has not applied the refund yet may answer
		// the direct get with 3 for a moment; an error or any other value
		// fails at once.
		for who, list := range map[string]func() ([]budget.Status, error){
			"orchestrator": func() ([]budget.Status, error) { return store.List(ctx) },
			"ops":          func() ([]budget.Status, error) { return budget.ListStatus(ctx, opsJ, time.Now()) },
		} {
			for {
				got, err := list()
				if err == nil && len(got) == 1 && got[0].Spent == 2 {
					break
				}
				if err != nil || len(got) != 1 || got[0].Spent != 3 || ctx.Err() != nil {
					t.Errorf("%s reads the spending: %+v, %v; want 2 spent", who, got, err)
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		if err := budget.Reset(ctx, opsJ, def.Name, time.Now()); err != nil {
			t.Fatalf("ops resets the budget: %v", err)
		}
		if _, err := store.Charge(ctx, call); err != nil {
			t.Errorf("charge after the reset: %v", err)
		}
		// one connection per refusal (untilRefused)
		wj, short := c.untilRefused(t, "worker", workerPassword, 10*time.Second)
		if err := budget.Set(short, wj, budget.Def{Name: "w", Tenant: "acme", Period: budget.Day, Limit: 1000}); err == nil {
			t.Error("a worker set a budget")
		}
		wj, short = c.untilRefused(t, "worker", workerPassword, 10*time.Second)
		if _, err := wj.PublishMsg(short, &nats.Msg{Subject: "toolpool.spend.perm=check.x", Header: nats.Header{"Nats-Incr": []string{"-5"}}}); err == nil {
			t.Error("a worker changed a budget's spending")
		}
		if err := budget.Remove(ctx, opsJ, def.Name); err != nil {
			t.Fatalf("ops removes the budget: %v", err)
		}
	})

	t.Run("result consumers are placed on the connection's server; the others are deleted", func(t *testing.T) {
		// The cluster places a one-replica consumer on one of TOOL_RESULTS'
		// three servers at random; ConsumeResults makes it again under a new
		// name until it is on the server of its connection, and deletes the
		// ones it did not keep (as the orchestrator user may). Four per node:
		// with twelve, some need more than one try for sure. Every request
		// has a context of its own: under -race beside other test binaries,
		// the cluster answers slowly.
		bounded := func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 30*time.Second)
		}
		wj, err := js.New(c.connect(t, "worker", workerPassword))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var made int
		var dropped []string      // consumers made and not kept
		var failures []chan error // each kept consumer's errors
		for _, n := range c.nodes {
			nc, err := jetstream.Connect(jetstream.ConnectOptions{
				URL: "nats://" + n.client, User: "orchestrator", Password: orchPassword, Name: "placement-" + n.name,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			oj, err := js.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				instance := fmt.Sprintf("place-%s-%d", n.name, i)
				got := make(chan string, 1)
				failed := make(chan error, 1)
				failures = append(failures, failed)
				ctx, cancel := bounded()
				rc, err := dispatch.ConsumeResults(ctx, oj, dispatch.ResultConsumerConfig{
					Name: "results_" + instance, Instance: instance, Logger: natstest.Logger(t),
					Handler: func(m js.Msg) {
						select {
						case got <- m.Subject():
						default:
						}
					},
					OnError: func(err error) {
						// Only what deleting the wrong consumer causes: a
						// heartbeat missed under load is not this test's.
						if !errors.Is(err, js.ErrConsumerDeleted) && !errors.Is(err, js.ErrConsumerNotFound) {
							return
						}
						select {
						case failed <- err:
						default:
						}
					},
				})
				cancel()
				if err != nil {
					t.Fatalf("%s: ConsumeResults: %v", n.name, err)
				}
				defer rc.Delete()
				defer rc.Stop()
				made++
				ctx, cancel = bounded()
				info, err := rc.Info(ctx)
				cancel()
				if err != nil {
					t.Fatalf("%s: info of %s: %v", n.name, rc.Name(), err)
				}
				if info.Cluster == nil || info.Cluster.Leader != n.name {
					t.Errorf("%s: result consumer %s is on %+v, not on the connection's server", n.name, rc.Name(), info.Cluster)
				}
				// It delivers: a result published now comes through it.
				key := envelope.CallKey("", "", "call_"+instance, "echo", []byte(`{}`))
				ctx, cancel = bounded()
				_, err = wj.Publish(ctx, jetstream.ResultSubject(instance, key), []byte(`{"v":1,"call_id":"x"}`))
				cancel()
				if err != nil {
					t.Fatalf("worker publishes a result: %v", err)
				}
				select {
				case subj := <-got:
					if subj != jetstream.ResultSubject(instance, key) {
						t.Errorf("%s: %s delivered %s", n.name, rc.Name(), subj)
					}
				case err := <-failed:
					t.Errorf("%s: %s: %v", n.name, rc.Name(), err)
				case <-time.After(30 * time.Second):
					t.Errorf("%s: %s delivered nothing", n.name, rc.Name())
				}
				base := "results_" + instance
				if rc.Name() == base {
					continue
				}
				tries, err := strconv.Atoi(strings.TrimPrefix(rc.Name(), base+"-"))
				if err != nil || tries < 1 {
					t.Fatalf("%s: kept consumer %q is not %s-<n>", n.name, rc.Name(), base)
				}
				dropped = append(dropped, base)
				for k := 1; k < tries; k++ {
					dropped = append(dropped, fmt.Sprintf("%s-%d", base, k))
				}
			}
		}
		t.Logf("%d result consumers made and checked in %v; %d made and not kept", made, time.Since(start).Round(time.Millisecond), len(dropped))
		if len(dropped) == 0 {
			t.Fatal("no result consumer needed a second try: the placement was not exercised")
		}
		// The ones not kept are deleted, in the background.
		deadline := time.Now().Add(90 * time.Second)
		for {
			var left []string
			for _, name := range dropped {
				// A look-up of a consumer being deleted may go unanswered
				// (a CI run waited out a shared context on one): short ones.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := p.j.Consumer(ctx, jetstream.StreamResults, name)
				cancel()
				if !errors.Is(err, js.ErrConsumerNotFound) {
					left = append(left, fmt.Sprintf("%s (%v)", name, err))
				}
			}
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("consumers made and not kept are still there after %v: %v", time.Since(start).Round(time.Second), left)
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("the %d consumers not kept were gone %v after the first was made", len(dropped), time.Since(start).Round(time.Millisecond))
		// Their deletion did not touch the ones kept.
		for _, failed := range failures {
			select {
			case err := <-failed:
				t.Errorf("a kept result consumer: %v", err)
			default:
			}
		}
	})

	t.Run("worker without consumer permissions fails at start", func(t *testing.T) {
		// The ops user may read consumers of TOOL_CALLS but not create them.
		w := refusedWorker
		select {
		case <-w.Done():
		case <-time.After(90 * time.Second):
			t.Fatalf("a worker with the ops user's permissions still runs:\n%s", w.Output())
		}
		out := w.Output()
		if w.Err() == nil {
			t.Errorf("worker exited 0; want a failure:\n%s", out)
		}
		if !strings.Contains(out, "worker: the NATS user may not use a subject the worker needs") ||
			!strings.Contains(out, `Publish to "$JS.API.CONSUMER.CREATE.TOOL_CALLS.tool_`) {
			t.Errorf("worker output does not name the refused subject:\n%s", out)
		}
		t.Logf("worker output:\n%s", proctest.Tail(out, 1500))
	})
}

// connectWatched connects as user, and returns the connection and the
// asynchronous errors (permissions violations) it reports.
func connectWatched(t *testing.T, c *cluster, user, password string) (*nats.Conn, chan error) {
	t.Helper()
	errs := make(chan error, 4)
	nc, err := nats.Connect(c.urls(), nats.UserInfo(user, password),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, errs
}
