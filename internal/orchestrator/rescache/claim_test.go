package rescache_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/rescache"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// TestClaimOnce: of 50 callers on two replicas claiming the same key at
// once, exactly one gets it; after its Release another can.
func TestClaimOnce(t *testing.T) {
	srv := natstest.Start(t)
	a := replica(t, srv.ClientURL(), rescache.Config{})
	b := replica(t, srv.ClientURL(), rescache.Config{})
	ctx := ctxT(t)
	k, _ := a.Key(searchCall("acme", `{"q":"once"}`))
	var won atomic.Int32
	var winner atomic.Pointer[rescache.Store]
	var wg sync.WaitGroup
	for i := range 50 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			ok, err := s.Claim(ctx, k, time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				won.Add(1)
				winner.Store(s)
			}
		})
	}
	wg.Wait()
	if n := won.Load(); n != 1 {
		t.Fatalf("%d callers claimed the key; want 1", n)
	}
	w := winner.Load()
	w.Release(ctx, k, nil)
	if ok, err := b.Claim(ctx, k, time.Minute); !ok || err != nil { // over the release's marker
		t.Fatalf("claiming a released key: %v, %v", ok, err)
	}
	if ok, _ := a.Claim(ctx, k, time.Minute); ok {
		t.Fatal("a claim while another lasts")
	}
}

// TestAwaitResult: a caller awaiting another replica's run gets the
// result it stores; a caller awaiting a released claim without a result
// is told to run it.
func TestAwaitResult(t *testing.T) {
	srv := natstest.Start(t)
	a := replica(t, srv.ClientURL(), rescache.Config{})
	b := replica(t, srv.ClientURL(), rescache.Config{})
	ctx := ctxT(t)
	k, _ := a.Key(searchCall("acme", `{"q":"await"}`))
	if ok, err := a.Claim(ctx, k, time.Minute); !ok || err != nil {
		t.Fatalf("Claim: %v, %v", ok, err)
	}
	got := make(chan error, 3)
	for range 3 {
		go func() {
			res, ok, err := b.Await(ctx, k)
			switch {
			case err != nil:
				got <- err
			case !ok || res.Content.Text() != "awaited":
				got <- errors.New("no result: " + res.Content.Text())
			default:
				got <- nil
			}
		}()
	}
	if err := a.Put(ctx, k, result("awaited"), time.Minute); err != nil {
		t.Fatal(err)
	}
	a.Release(ctx, k, nil)
	for range 3 {
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	}

	// released without a result: the waiter is told, and can claim it
	k2, _ := a.Key(searchCall("acme", `{"q":"failed run"}`))
	if ok, _ := a.Claim(ctx, k2, time.Minute); !ok {
		t.Fatal("no claim")
	}
	done := make(chan bool, 1)
	go func() {
		_, ok, err := b.Await(ctx, k2)
		if err != nil {
			t.Error(err)
		}
		done <- ok
	}()
	a.Release(ctx, k2, nil)
	if ok := <-done; ok {
		t.Fatal("a result for a run that stored none")
	}
	if ok, err := b.Claim(ctx, k2, time.Minute); !ok || err != nil {
		t.Fatalf("claiming a released key: %v, %v", ok, err)
	}
	// released with the run's failure: its waiters get the failure, not
	// a run each; a caller that comes later claims and runs
	k4, _ := b.Key(searchCall("acme", `{"q":"failing"}`))
	if ok, _ := b.Claim(ctx, k4, time.Minute); !ok {
		t.Fatal("no claim")
	}
	failure := make(chan envelope.Result, 1)
	go func() {
		res, ok, err := a.Await(ctx, k4)
		if err != nil || !ok {
			t.Errorf("awaiting a failed run: %v, %v", ok, err)
		}
		failure <- res
	}()
	failed := &envelope.Result{V: envelope.Version, CallID: "x", Tool: "search", IsError: true, Code: "http_503", Content: envelope.Text("search failed: 503")}
	b.Release(ctx, k4, failed)
	if res := <-failure; !res.IsError || res.Code != "http_503" {
		t.Fatalf("the waiter got %+v, want the run's failure", res)
	}
	if _, hit, _ := a.Get(ctx, k4); hit {
		t.Fatal("a failure must not be cached")
	}
	if ok, err := a.Claim(ctx, k4, time.Minute); !ok || err != nil {
		t.Fatalf("a later caller claims a key released with a failure: %v, %v", ok, err)
	}

	// with no claim at all, Await returns at once
	k3, _ := a.Key(searchCall("acme", `{"q":"nobody"}`))
	if _, ok, err := a.Await(ctx, k3); ok || err != nil {
		t.Fatalf("Await without a claim: %v, %v", ok, err)
	}
}

// TestClaimAfterResult: a run that ended between a caller's Get and its
// Claim: the claim is granted (the caller looks again, as the gate does,
// and releases it), and Await, had it waited, returns the result.
func TestClaimAfterResult(t *testing.T) {
	srv := natstest.Start(t)
	a := replica(t, srv.ClientURL(), rescache.Config{})
	b := replica(t, srv.ClientURL(), rescache.Config{})
	ctx := ctxT(t)
	k, _ := a.Key(searchCall("acme", `{"q":"just done"}`))
	if ok, _ := a.Claim(ctx, k, time.Minute); !ok {
		t.Fatal("no claim")
	}
	if err := a.Put(ctx, k, result("done"), time.Minute); err != nil {
		t.Fatal(err)
	}
	a.Release(ctx, k, nil)
	if res, ok, err := b.Await(ctx, k); !ok || err != nil || res.Content.Text() != "done" {
		t.Fatalf("Await: %+v, %v, %v", res, ok, err)
	}
	if ok, err := b.Claim(ctx, k, time.Minute); !ok || err != nil {
		t.Fatalf("Claim after the release: %v, %v", ok, err)
	}
	if _, found, _ := b.Get(ctx, k); !found {
		t.Fatal("the result is gone")
	}
	b.Release(ctx, k, nil)
	if ok, _ := a.Claim(ctx, k, time.Minute); !ok {
		t.Fatal("a released claim still holds")
	}
}

// TestClaimExpires: a claim whose holder never releases it (a replica
// that died) ends at its hold; the waiter is then told to run the call,
// and the late holder's Release does not end the new claim.
func TestClaimExpires(t *testing.T) {
	srv := natstest.Start(t)
	a := replica(t, srv.ClientURL(), rescache.Config{})
	b := replica(t, srv.ClientURL(), rescache.Config{})
	ctx := ctxT(t)
	k, _ := a.Key(searchCall("acme", `{"q":"lost"}`))
	start := time.Now()
	if ok, _ := a.Claim(ctx, k, 1500*time.Millisecond); !ok { // held 2 s
		t.Fatal("no claim")
	}
	if _, ok, err := b.Await(ctx, k); ok || err != nil {
		t.Fatalf("Await of a lapsed claim: %v, %v", ok, err)
	}
	if waited := time.Since(start); waited < 2*time.Second {
		t.Fatalf("the claim ended after %v; it was held 2 s", waited)
	}
	if ok, err := b.Claim(ctx, k, time.Minute); !ok || err != nil {
		t.Fatalf("claiming a lapsed key: %v, %v", ok, err)
	}
	a.Release(ctx, k, nil) // a's claim lapsed: b's stays
	if ok, _ := a.Claim(ctx, k, time.Minute); ok {
		t.Fatal("a late Release ended another replica's claim")
	}
}

// TestAwaitCancelled: Await ends with its ctx.
func TestAwaitCancelled(t *testing.T) {
	srv := natstest.Start(t)
	a := replica(t, srv.ClientURL(), rescache.Config{})
	k, _ := a.Key(searchCall("acme", `{"q":"slow"}`))
	if ok, _ := a.Claim(ctxT(t), k, time.Minute); !ok {
		t.Fatal("no claim")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, ok, err := a.Await(ctx, k); ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Await past its ctx: %v, %v", ok, err)
	}
	if _, err := a.Claim(ctxT(t), "nope", time.Second); !errors.Is(err, rescache.ErrNotCacheable) {
		t.Fatalf("Claim of a bad key: %v", err)
	}
}
