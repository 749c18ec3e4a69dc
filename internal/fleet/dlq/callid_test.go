package dlq_test

import (
	"slices"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
)

// A call id finds its dead letters, exactly or by prefix, and a purge by
// call id deletes those only.
func TestStoreFilterByCallID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newStore(t, b)
	a := deadLetter(t, b.js, classify.FateExhausted, "alpha", "toolu_abc_1")
	ab := deadLetter(t, b.js, classify.FateExhausted, "beta", "toolu_abc_2")
	deadLetter(t, b.js, classify.FateExhausted, "alpha", "toolu_xyz_1")
	// A body that is not an entry is matched by its header.
	m := nats.NewMsg(jetstream.DLQSubject("alpha"))
	m.Data = []byte("not json")
	m.Header.Set("Toolpool-Call-Id", "toolu_abc_3")
	ack, err := b.js.PublishMsg(ctxFor(t), m)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		want []uint64
	}{
		{"toolu_abc_1", []uint64{a}},
		{"toolu_abc", []uint64{a, ab, ack.Sequence}},
		{"toolu_ab", []uint64{a, ab, ack.Sequence}},
		{"abc", nil}, // a prefix, not a substring
		{"toolu_abc_1x", nil},
	} {
		ls, err := s.List(ctxFor(t), dlq.Filter{CallID: tc.id})
		if err != nil {
			t.Fatal(err)
		}
		if got := seqsOf(ls); !slices.Equal(got, tc.want) {
			t.Errorf("call id %q: seqs %v, want %v", tc.id, got, tc.want)
		}
	}
	if n, err := s.Purge(ctxFor(t), dlq.Filter{CallID: "toolu_abc_2"}); err != nil || n != 1 {
		t.Errorf("Purge by call id = %d, %v; want 1", n, err)
	}
	if _, err := s.Get(ctxFor(t), ab); err == nil {
		t.Error("the purged call's dead letter is still there")
	}
	if _, err := s.Get(ctxFor(t), a); err != nil {
		t.Errorf("another call's dead letter went: %v", err)
	}
}
