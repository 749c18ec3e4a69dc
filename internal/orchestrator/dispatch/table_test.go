package dispatch

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
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

	out, tool, start := tb.deliver("a", result("a", "one"), now.Add(time.Second), nil)
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
	if out, _, _ := tb.deliver("a", result("a", "two"), now, nil); out != outcomeDuplicate {
		t.Errorf("second delivery = %v, want duplicate", out)
	}
	if len(ch) != 0 {
		t.Error("a duplicate reached a waiter")
	}
	if r, ok := tb.register("a", "echo", w, now); !ok || r.Content.Text() != "one" {
		t.Errorf("register of an answered id = %v, %v; want the cached result", r, ok)
	}
	if out, _, _ := tb.deliver("zzz", result("zzz", "x"), now, nil); out != outcomeUnknown {
		t.Errorf("unknown id = %v", out)
	}

	// A call whose waiter left is gone; its result is late, then cached.
	tb.register("b", "slow", w, now)
	tb.leave("b", w, now)
	if out, tool, _ := tb.deliver("b", result("b", "late"), now, nil); out != outcomeLate || tool != "slow" {
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
	if out, _, _ := tb.deliver("c", result("c", "back"), now, nil); out != outcomeDelivered {
		t.Errorf("deliver to a re-registered call = %v", out)
	}
	if d := <-ch; d.idx != 1 || d.res.Content.Text() != "back" {
		t.Errorf("delivery = %+v", d)
	}

	// Leaving one of two waiters keeps the call pending for the other.
	tb.register("d", "echo", w, now)
	tb.register("d", "echo", w2, now)
	tb.leave("d", w, now)
	if out, _, _ := tb.deliver("d", result("d", "x"), now, nil); out != outcomeDelivered {
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
		if out, _, _ := tb.deliver("old", result("old", "again"), now.Add(30*time.Second), nil); out != outcomeDuplicate {
			t.Errorf("within ttl: %v, want duplicate", out)
		}
		if out, _, _ := tb.deliver("old", result("old", "again"), now.Add(2*time.Minute), nil); out != outcomeUnknown {
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
		// A shard's ring holds about two results: a newer one overwrites
		// the oldest, which is then no longer served.
		one := len(result("0000", "x").data)
		tb := newCallTable(time.Hour, 1_000_000, int64(tableShards*(2*one+one/2)))
		ids := make([]string, 0, 2000)
		for i := range 2000 {
			id := fmt.Sprintf("%04d", i)
			ids = append(ids, id)
			tb.register(id, "echo", waiter{ch: make(chan delivery, 1)}, now)
			tb.deliver(id, result(id, "x"), now, nil)
		}
		cached := 0
		for _, id := range ids {
			s := tb.shard(id)
			k, _ := settledKeyOf(id)
			se := s.settled[k]
			if _, ok := s.ring.get(se.pos, se.size); ok && se.size > 0 {
				cached++
			}
			if len(s.ring.buf) != 2*one+one/2 {
				t.Fatalf("shard ring of %d bytes, want %d", len(s.ring.buf), 2*one+one/2)
			}
		}
		if cached == 0 || cached > 2*tableShards {
			t.Errorf("%d results still cached, want between 1 and %d (two per shard)", cached, 2*tableShards)
		}
		// The newest result of each shard is served; an overwritten one is
		// not, and its call waits for a result again.
		last := map[*tableShard]string{}
		first := map[*tableShard]string{}
		for _, id := range ids {
			s := tb.shard(id)
			last[s] = id
			if _, ok := first[s]; !ok {
				first[s] = id
			}
		}
		for s, id := range last {
			if r, ok := tb.register(id, "echo", waiter{ch: make(chan delivery, 1)}, now); !ok || r.CallID != id {
				t.Errorf("the newest result of a shard (%s) was not served: %v, %v", id, r, ok)
			}
			if first[s] == id {
				continue
			}
			if _, ok := tb.register(first[s], "echo", waiter{ch: make(chan delivery, 1)}, now); ok {
				t.Errorf("an overwritten result (%s) was served", first[s])
			}
		}
	})

	t.Run("result over budget is not cached", func(t *testing.T) {
		tb := newCallTable(time.Hour, 1000, tableShards*10)
		tb.register("big", "echo", waiter{ch: make(chan delivery, 1)}, now)
		tb.deliver("big", result("big", "more than ten bytes"), now, nil)
		if _, ok := tb.register("big", "echo", waiter{ch: make(chan delivery, 1)}, now); ok {
			t.Error("a result over the byte budget was cached")
		}
	})
}

// settle registers id and answers it.
func settle(tb *callTable, id string, now time.Time) {
	ch := make(chan delivery, 1)
	tb.register(id, "echo", waiter{ch: ch}, now)
	tb.deliver(id, result(id, "x"), now, nil)
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
	tb.deliver("k", result("k", "done"), now, nil)
	if r, ok, _ := tb.registerEpoch("k", "sleep", w2, now); !ok || cachedResult("k", "sleep", r).Content.Text() != "done" {
		t.Errorf("after its result: %s, %v; want the cached result", r, ok)
	}
}

// A settled call holds none of its waiters' turns: it leaves the pending
// calls, and its entry is reset for reuse.
func TestCallTableSettledHoldsNoWaiter(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	tb := newCallTable(time.Minute, 1000, 1<<20)
	ch := make(chan delivery, 4)
	tb.register("a", "echo", waiter{ch: ch, idx: 0}, now)
	tb.register("a", "echo", waiter{ch: ch, idx: 1}, now) // past the room for one
	tb.deliver("a", result("a", "one"), now, nil)
	tb.register("b", "echo", waiter{ch: ch, idx: 2}, now)
	tb.leave("b", waiter{ch: ch, idx: 2}, now)
	for _, key := range []string{"a", "b"} {
		s := tb.shard(key)
		if s.calls[key] != nil {
			t.Errorf("%s: a settled call is still pending", key)
		}
		for _, e := range s.free {
			if e.waiters != nil || e.first[0] != (waiter{}) || e.tool != "" {
				t.Errorf("%s: an entry kept for reuse holds %+v", key, *e)
			}
		}
	}
}

// What the table keeps of settled calls holds no pointer, so that the
// garbage collector does not scan it, whatever its size.
func TestCallTableSettledHoldsNoPointer(t *testing.T) {
	t.Parallel()
	for _, v := range []any{settledKey{}, settledEntry{}, fifoItem{}} {
		if typ := reflect.TypeOf(v); hasPointers(typ) {
			t.Errorf("%v holds a pointer", typ)
		}
	}
}

// hasPointers reports whether a value of typ holds a pointer.
func hasPointers(typ reflect.Type) bool {
	switch typ.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return typ.Len() > 0 && hasPointers(typ.Elem())
	case reflect.Struct:
		for i := range typ.NumField() {
			if hasPointers(typ.Field(i).Type) {
				return true
			}
		}
		return false
	default:
		return true
	}
}

// The ring serves a result until newer ones overwrite its bytes, and never
// a result whose bytes were partly overwritten.
func TestResultRing(t *testing.T) {
	t.Parallel()
	var r resultRing
	const size = 10
	if _, ok := r.put(nil, size); ok {
		t.Error("an empty result was cached")
	}
	if _, ok := r.put(make([]byte, size+1), size); ok {
		t.Error("a result larger than the ring was cached")
	}
	type put struct {
		pos  uint64
		data string
	}
	var puts []put
	for i, d := range []string{"aaaa", "bbb", "cc", "dddd", "e", "ffffff", "gggggggggg", "h"} {
		pos, ok := r.put([]byte(d), size)
		if !ok {
			t.Fatalf("put %d (%q) refused", i, d)
		}
		puts = append(puts, put{pos, d})
		served := 0
		for j, p := range puts {
			got, ok := r.get(p.pos, uint32(len(p.data)))
			if ok && string(got) != p.data {
				t.Fatalf("after put %d: result %d is served as %q, want %q", i, j, got, p.data)
			}
			if ok {
				served++
			}
		}
		if _, ok := r.get(pos, uint32(len(d))); !ok {
			t.Fatalf("after put %d: its own result is not served", i)
		}
		if i > 0 && served < 2 && len(d)+len(puts[i-1].data) <= size/2 {
			t.Fatalf("after put %d: only %d results served", i, served)
		}
	}
	if got, ok := r.get(puts[len(puts)-1].pos, 1); !ok || string(got) != "h" {
		t.Errorf("the newest result: %q, %v", got, ok)
	}
	if _, ok := r.get(puts[0].pos, 4); ok {
		t.Error("the oldest result was served after the ring went round")
	}
}

// The ring's buffer grows with the results it holds, to the ring's size
// at most, and serves every result it still holds as it was put, across
// the growths and the wraps.
func TestResultRingGrows(t *testing.T) {
	t.Parallel()
	var r resultRing
	const size = 100_000
	if _, ok := r.put([]byte("first"), size); !ok {
		t.Fatal("put refused")
	}
	if len(r.buf) > minRingBuf {
		t.Fatalf("one result of 5 bytes made a buffer of %d bytes, want at most %d", len(r.buf), minRingBuf)
	}
	type put struct {
		pos  uint64
		data []byte
	}
	var puts []put
	rng := rand.New(rand.NewPCG(1, 2))
	total := 0
	for i := range 2000 {
		d := make([]byte, 1+rng.IntN(700))
		for j := range d {
			d[j] = byte(i + j)
		}
		before := len(r.buf)
		pos, ok := r.put(d, size)
		if !ok {
			t.Fatalf("put %d refused", i)
		}
		total += len(d)
		if len(r.buf) != before { // grown: every result still held is served as put
			for j, p := range puts {
				if got, ok := r.get(p.pos, uint32(len(p.data))); ok && !bytes.Equal(got, p.data) {
					t.Fatalf("after the buffer grew to %d bytes, result %d is served with other bytes", len(r.buf), j)
				}
			}
		}
		if len(r.buf) > size || (total < size/4 && len(r.buf) > 2*total+minRingBuf) {
			t.Fatalf("after %d bytes put, the buffer is %d bytes", total, len(r.buf))
		}
		puts = append(puts, put{pos, d})
		if got, ok := r.get(pos, uint32(len(d))); !ok || !bytes.Equal(got, d) {
			t.Fatalf("put %d: its own result is not served as put", i)
		}
	}
	served := 0
	for i, p := range puts {
		got, ok := r.get(p.pos, uint32(len(p.data)))
		if !ok {
			continue
		}
		served++
		if !bytes.Equal(got, p.data) {
			t.Fatalf("result %d is served with other bytes", i)
		}
	}
	if len(r.buf) != size {
		t.Errorf("after %d bytes put, the buffer is %d bytes, want the ring's %d", total, len(r.buf), size)
	}
	if served < size/700/2 || served == len(puts) {
		t.Errorf("%d of %d results served from a ring of %d bytes", served, len(puts), size)
	}
}
