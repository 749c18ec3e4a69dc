package dlq_test

import (
	"slices"
	"testing"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/pkg/classify"
)

// Pages follow each other by sequence, with the filters the console
// offers (code, text) applied on the way.
func TestStorePageFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newStore(t, b)
	var all, coded []uint64
	for i := range 7 {
		code := "http_503"
		if i%2 == 1 {
			code = "timeout"
		}
		seq := deadLetter(t, b.js, classify.FateExhausted, "alpha", newID(), settle.Attempt{N: 1, Code: code, Message: "attempt " + code})
		all = append(all, seq)
		if code == "timeout" {
			coded = append(coded, seq)
		}
	}
	var got []uint64
	f := dlq.Filter{}
	for {
		page, more, err := s.Page(ctxFor(t), f, 3)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, seqsOf(page)...)
		if !more {
			break
		}
		f.After = page[len(page)-1].Seq
	}
	if !slices.Equal(got, all) {
		t.Errorf("pages of 3: %v, want %v", got, all)
	}
	page, more, err := s.Page(ctxFor(t), dlq.Filter{Code: "timeout"}, 10)
	if err != nil || more || !slices.Equal(seqsOf(page), coded) {
		t.Errorf("code page = %v, more %v, %v; want %v", seqsOf(page), more, err, coded)
	}
	page, _, err = s.Page(ctxFor(t), dlq.Filter{Text: "ATTEMPT TIMEOUT", After: coded[0]}, 10)
	if err != nil || !slices.Equal(seqsOf(page), coded[1:]) {
		t.Errorf("text page after %d = %v, %v; want %v", coded[0], seqsOf(page), err, coded[1:])
	}
	if n, err := s.Purge(ctxFor(t), dlq.Filter{Code: "timeout"}); err != nil || n != len(coded) {
		t.Errorf("Purge by code = %d, %v; want %d", n, err, len(coded))
	}
}

// TestStoreRefusesWildcardTool: a tool filter that is not one subject
// token ("*", ">", a space) is refused by every read and by Purge, and
// deletes nothing: as a subject it would select every tool's letters.
func TestStoreRefusesWildcardTool(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newStore(t, b)
	deadLetter(t, b.js, classify.FateExhausted, "alpha", newID(), settle.Attempt{N: 1, Code: "timeout", Message: "attempt"})
	deadLetter(t, b.js, classify.FateExhausted, "beta", newID(), settle.Attempt{N: 1, Code: "timeout", Message: "attempt"})
	for _, tool := range []string{"*", ">", "a b", "alpha.>"} {
		f := dlq.Filter{Tool: tool}
		if n, err := s.Purge(ctxFor(t), f); err == nil || n != 0 {
			t.Errorf("Purge(tool %q) = %d, %v; want an error and nothing deleted", tool, n, err)
		}
		if l, err := s.List(ctxFor(t), f); err == nil || len(l) != 0 {
			t.Errorf("List(tool %q) = %d letters, %v; want an error", tool, len(l), err)
		}
	}
	if l, err := s.List(ctxFor(t), dlq.Filter{}); err != nil || len(l) != 2 {
		t.Errorf("after the refused purges: %d letters, %v; want 2", len(l), err)
	}
}
