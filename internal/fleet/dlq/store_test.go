package dlq_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
)

func newStore(t *testing.T, b *bundle) *dlq.Store {
	t.Helper()
	s, err := dlq.NewStore(ctxFor(t), b.js)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreListFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newStore(t, b)
	if ls, err := s.List(ctxFor(t), dlq.Filter{}); err != nil || len(ls) != 0 {
		t.Fatalf("List of an empty TOOL_DLQ = %d, %v", len(ls), err)
	}
	a1 := deadLetter(t, b.js, classify.FateExhausted, "alpha", newID())
	b1 := deadLetter(t, b.js, classify.FatePoison, "beta", newID())
	a2 := deadLetter(t, b.js, classify.FateExpired, "alpha", newID())
	// A body that is not an entry is listed, not skipped.
	m := nats.NewMsg(jetstream.DLQSubject("beta"))
	m.Data = []byte("not json")
	m.Header.Set(settle.HeaderReason, "exhausted")
	ack, err := b.js.PublishMsg(ctxFor(t), m)
	if err != nil {
		t.Fatal(err)
	}
	junk := ack.Sequence
	time.Sleep(20 * time.Millisecond)
	mark := time.Now()
	a3 := deadLetter(t, b.js, classify.FateExhausted, "alpha", newID())

	for _, tc := range []struct {
		name string
		f    dlq.Filter
		want []uint64
	}{
		{"all", dlq.Filter{}, []uint64{a1, b1, a2, junk, a3}},
		{"tool", dlq.Filter{Tool: "alpha"}, []uint64{a1, a2, a3}},
		{"reason", dlq.Filter{Reason: classify.FateExhausted}, []uint64{a1, junk, a3}},
		{"tool and reason", dlq.Filter{Tool: "beta", Reason: classify.FatePoison}, []uint64{b1}},
		{"since", dlq.Filter{Since: mark}, []uint64{a3}},
		{"up to", dlq.Filter{UpTo: a2}, []uint64{a1, b1, a2}},
		{"no such tool", dlq.Filter{Tool: "gamma"}, nil},
	} {
		ls, err := s.List(ctxFor(t), tc.f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := seqsOf(ls); !slices.Equal(got, tc.want) {
			t.Errorf("%s: seqs %v, want %v", tc.name, got, tc.want)
		}
	}

	l, err := s.Get(ctxFor(t), junk)
	if err != nil {
		t.Fatal(err)
	}
	if l.Entry != nil || l.Err == nil || l.Tool() != "beta" || l.Reason() != classify.FateExhausted {
		t.Errorf("junk letter: entry %v, err %v, tool %q, reason %q", l.Entry, l.Err, l.Tool(), l.Reason())
	}
	l, err = s.Get(ctxFor(t), b1)
	if err != nil || l.Entry == nil || l.Tool() != "beta" || l.Reason() != classify.FatePoison || l.Subject != jetstream.DLQSubject("beta") {
		t.Errorf("Get(%d) = %+v, %v", b1, l, err)
	}
	if _, err := s.Get(ctxFor(t), 999); !errors.Is(err, dlq.ErrNotFound) {
		t.Errorf("Get of a missing sequence: %v, want ErrNotFound", err)
	}
	counts, err := s.Counts(ctxFor(t))
	if err != nil || counts["alpha"] != 3 || counts["beta"] != 2 || len(counts) != 2 {
		t.Errorf("Counts = %v, %v", counts, err)
	}
}

// Scan visits what was stored when it began, not what is dead-lettered
// while it runs (a replay whose calls fail again must not loop).
func TestScanStopsAtStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newStore(t, b)
	for range 3 {
		deadLetter(t, b.js, classify.FateExhausted, "alpha", newID())
	}
	visited := 0
	err := s.Scan(ctxFor(t), dlq.Filter{}, func(*dlq.Letter) error {
		visited++
		deadLetter(t, b.js, classify.FateExhausted, "alpha", newID())
		return nil
	})
	if err != nil || visited != 3 {
		t.Errorf("Scan visited %d, %v; want 3", visited, err)
	}
	stop := errors.New("stop")
	if err := s.Scan(ctxFor(t), dlq.Filter{}, func(*dlq.Letter) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("Scan returned %v, want fn's error", err)
	}
}

func TestStoreDeleteAndPurge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newStore(t, b)
	var alpha, beta []uint64
	for range 3 {
		alpha = append(alpha, deadLetter(t, b.js, classify.FateExhausted, "alpha", newID()))
		beta = append(beta, deadLetter(t, b.js, classify.FatePoison, "beta", newID()))
	}
	if err := s.Delete(ctxFor(t), alpha[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctxFor(t), alpha[0]); !errors.Is(err, dlq.ErrNotFound) {
		t.Errorf("deleting twice: %v, want ErrNotFound", err)
	}
	// By tool, up to a sequence: the server purges in one request.
	n, err := s.Purge(ctxFor(t), dlq.Filter{Tool: "alpha", UpTo: alpha[1]})
	if err != nil || n != 1 {
		t.Errorf("Purge alpha up to %d = %d, %v; want 1", alpha[1], n, err)
	}
	// By reason: letter by letter.
	if n, err := s.Purge(ctxFor(t), dlq.Filter{Reason: classify.FatePoison}); err != nil || n != 3 {
		t.Errorf("Purge poison = %d, %v; want 3", n, err)
	}
	ls, _ := s.List(ctxFor(t), dlq.Filter{})
	if got := seqsOf(ls); !slices.Equal(got, []uint64{alpha[2]}) {
		t.Errorf("left %v, want %v", got, alpha[2:])
	}
	if n, err := s.Purge(ctxFor(t), dlq.Filter{}); err != nil || n != 1 {
		t.Errorf("Purge all = %d, %v; want 1", n, err)
	}
	if n := streamMsgs(t, b.js, jetstream.StreamDLQ); n != 0 {
		t.Errorf("TOOL_DLQ holds %d after purging all", n)
	}
}
