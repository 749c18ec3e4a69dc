package dispatch

import (
	"fmt"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/envelope"
)

func result(id, text string) arrival {
	res := &envelope.Result{V: envelope.Version, CallID: id, Content: envelope.Text(text)}
	data, err := envelope.EncodeResult(res)
	if err != nil {
		panic(err)
	}
	return arrival{res: res, data: data}
}

func TestCallTableOutcomes(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	tb := newCallTable(time.Minute, 1000, 1<<20)
	ch := make(chan delivery, 4)
	w := waiter{ch: ch, idx: 0}

	if _, ok := tb.register("a", "echo", w, now); ok {
		t.Fatal("a fresh id had a cached result")
	}
	w2 := waiter{ch: ch, idx: 1} // a second waiter of the same id: fan-out
	tb.register("a", "echo", w2, now)

	out, tool, start := tb.deliver("a", result("a", "one"), 10, now.Add(time.Second), nil)
	if out != outcomeDelivered || tool != "echo" || !start.Equal(now) {
		t.Fatalf("deliver = %v %q %v", out, tool, start)
	}
	got := map[int]string{}
	var owned [2]*envelope.Result
	for range 2 {
		d := <-ch
		got[d.idx] = d.res.Content.Text()
		owned[d.idx] = d.res
	}
	if got[0] != "one" || got[1] != "one" {
		t.Errorf("deliveries = %v, want both waiters to get the result", got)
	}
	// Each waiter owns what it got: a change by one is not seen by the other.
	owned[0].Content[0].Text = "changed"
	if owned[1].Content.Text() != "one" {
		t.Errorf("the waiters share their result's content")
	}
	if out, _, _ := tb.deliver("a", result("a", "two"), 10, now, nil); out != outcomeDuplicate {
		t.Errorf("second delivery = %v, want duplicate", out)
	}
	if len(ch) != 0 {
		t.Error("a duplicate reached a waiter")
	}
	if r, ok := tb.register("a", "echo", w, now); !ok || r.Content.Text() != "one" {
		t.Errorf("register of an answered id = %v, %v; want the cached result", r, ok)
	}
	if out, _, _ := tb.deliver("zzz", result("zzz", "x"), 10, now, nil); out != outcomeUnknown {
		t.Errorf("unknown id = %v", out)
	}

	// A call whose waiter left is gone; its result is late, then cached.
	tb.register("b", "slow", w, now)
	tb.leave("b", w, now)
	if out, tool, _ := tb.deliver("b", result("b", "late"), 10, now, nil); out != outcomeLate || tool != "slow" {
		t.Errorf("deliver after leave = %v %q, want late slow", out, tool)
	}
	if len(ch) != 0 {
		t.Error("a late result reached a waiter that left")
	}
	if r, ok := tb.register("b", "slow", w, now); !ok || r.Content.Text() != "late" {
		t.Errorf("register after a late result = %v, %v; want it cached", r, ok)
	}

	// A gone call dispatched again waits again, and gets the result.
	tb.register("c", "slow", w, now)
	tb.leave("c", w, now)
	if _, ok := tb.register("c", "slow", w2, now); ok {
		t.Fatal("gone call had a cached result")
	}
	if out, _, _ := tb.deliver("c", result("c", "back"), 10, now, nil); out != outcomeDelivered {
		t.Errorf("deliver to a re-registered call = %v", out)
	}
	if d := <-ch; d.idx != 1 || d.res.Content.Text() != "back" {
		t.Errorf("delivery = %+v", d)
	}

	// Leaving one of two waiters keeps the call pending for the other.
	tb.register("d", "echo", w, now)
	tb.register("d", "echo", w2, now)
	tb.leave("d", w, now)
	if out, _, _ := tb.deliver("d", result("d", "x"), 10, now, nil); out != outcomeDelivered {
		t.Errorf("deliver = %v", out)
	}
	if d := <-ch; d.idx != 1 {
		t.Errorf("delivered to waiter %d, want 1", d.idx)
	}
	if pending, settled := tb.stats(); pending != 0 || settled != 4 {
		t.Errorf("stats = %d pending, %d settled; want 0, 4", pending, settled)
	}
}

func TestCallTableEviction(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)

	t.Run("by age", func(t *testing.T) {
		tb := newCallTable(time.Minute, 1000, 1<<20)
		settle(tb, "old", now)
		if out, _, _ := tb.deliver("old", result("old", "again"), 1, now.Add(30*time.Second), nil); out != outcomeDuplicate {
			t.Errorf("within ttl: %v, want duplicate", out)
		}
		if out, _, _ := tb.deliver("old", result("old", "again"), 1, now.Add(2*time.Minute), nil); out != outcomeUnknown {
			t.Errorf("after ttl: %v, want unknown", out)
		}
	})

	t.Run("by count", func(t *testing.T) {
		tb := newCallTable(time.Hour, tableShards*2, 1<<30) // 2 per shard
		for i := range 5000 {
			settle(tb, fmt.Sprint(i), now)
		}
		if _, settled := tb.stats(); settled > tableShards*2 {
			t.Errorf("%d settled ids kept, want at most %d", settled, tableShards*2)
		}
		for i := range tb.shards {
			if n := len(tb.shards[i].fifo); n > 200 {
				t.Errorf("shard %d fifo holds %d items; evicted items must be reclaimed", i, n)
			}
		}
	})

	t.Run("by bytes", func(t *testing.T) {
		tb := newCallTable(time.Hour, 1_000_000, tableShards*100) // 100 bytes per shard
		for i := range 2000 {
			id := fmt.Sprint(i)
			tb.register(id, "echo", waiter{ch: make(chan delivery, 1)}, now)
			tb.deliver(id, result(id, "x"), 40, now, nil)
		}
		var bytes int64
		for i := range tb.shards {
			if tb.shards[i].bytes > 100 {
				t.Errorf("shard %d caches %d bytes, budget 100", i, tb.shards[i].bytes)
			}
			bytes += tb.shards[i].bytes
		}
		if bytes == 0 {
			t.Error("nothing cached")
		}
	})

	t.Run("result over budget is not cached", func(t *testing.T) {
		tb := newCallTable(time.Hour, 1000, tableShards*100)
		tb.register("big", "echo", waiter{ch: make(chan delivery, 1)}, now)
		tb.deliver("big", result("big", "x"), 1000, now, nil)
		if _, ok := tb.register("big", "echo", waiter{ch: make(chan delivery, 1)}, now); ok {
			t.Error("a result over the byte budget was cached")
		}
	})
}

// settle registers id and answers it.
func settle(tb *callTable, id string, now time.Time) {
	ch := make(chan delivery, 1)
	tb.register(id, "echo", waiter{ch: ch}, now)
	tb.deliver(id, result(id, "x"), 1, now, nil)
}

// A call cancelled by its last waiter is published again under a new
// Nats-Msg-Id; one whose other waiter stays, or that left without a
// cancellation, keeps its own.
func TestCallTableCancelEpochs(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	tb := newCallTable(time.Minute, 1000, 1<<20)
	ch := make(chan delivery, 4)
	w1, w2 := waiter{ch: ch, idx: 0}, waiter{ch: ch, idx: 1}

	if _, _, epoch := tb.registerEpoch("k", "sleep", w1, now); epoch != 0 || callMsgID("k", epoch) != "k" {
		t.Fatalf("a new call: epoch %d, Msg-Id %q; want 0 and the key", epoch, callMsgID("k", epoch))
	}
	tb.register("k", "sleep", w2, now)
	if tb.leaveFor("k", w1, now, true) {
		t.Error("the first of two waiters leaving was reported as the last")
	}
	if !tb.leaveFor("k", w2, now, true) {
		t.Error("the last waiter leaving was not reported as the last")
	}
	_, _, epoch := tb.registerEpoch("k", "sleep", w1, now)
	if epoch != 1 || callMsgID("k", epoch) != "k.1" {
		t.Errorf("after a cancellation: epoch %d, Msg-Id %q; want 1 and k.1", epoch, callMsgID("k", epoch))
	}
	if !tb.leaveFor("k", w1, now, false) {
		t.Error("the only waiter leaving was not reported as the last")
	}
	if _, _, epoch := tb.registerEpoch("k", "sleep", w1, now); epoch != 1 {
		t.Errorf("after a deadline: epoch %d; want 1 still", epoch)
	}
	tb.deliver("k", result("k", "done"), 10, now, nil)
	if r, ok, _ := tb.registerEpoch("k", "sleep", w2, now); !ok || cachedResult("k", "sleep", r).Content.Text() != "done" {
		t.Errorf("after its result: %s, %v; want the cached result", r, ok)
	}
}

// A settled call holds none of its waiters' turns.
func TestCallTableSettledHoldsNoWaiter(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	tb := newCallTable(time.Minute, 1000, 1<<20)
	ch := make(chan delivery, 4)
	tb.register("a", "echo", waiter{ch: ch, idx: 0}, now)
	tb.register("a", "echo", waiter{ch: ch, idx: 1}, now) // past the room for one
	tb.deliver("a", result("a", "one"), 10, now, nil)
	tb.register("b", "echo", waiter{ch: ch, idx: 2}, now)
	tb.leave("b", waiter{ch: ch, idx: 2}, now)
	for _, key := range []string{"a", "b"} {
		s := tb.shard(key)
		e := s.calls[key]
		if len(e.waiters) != 0 || e.first[0] != (waiter{}) {
			t.Errorf("%s: settled entry holds waiters %v, %v", key, e.waiters, e.first)
		}
	}
}
