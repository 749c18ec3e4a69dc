package dlq_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// ReplayResults hands over each expected call's first result, counts the
// is_error ones and those with none in time as failed, ignores results of
// other calls and results stored before it started, and deletes its
// consumer when stopped.
func TestReplayResultsWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const instance = "replay-test"
	publish := func(id string, isError bool, text string) {
		t.Helper()
		key := envelope.CallKey("", "", id, "echo", []byte(text))
		res := &envelope.Result{V: envelope.Version, CallID: id, Key: key, IsError: isError, Content: envelope.Text(text)}
		if isError {
			res.Class, res.Code = envelope.ClassPermanent, "http_404"
		}
		data, err := envelope.EncodeResult(res)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.js.Publish(ctxFor(t), jetstream.ResultSubject(instance, key), data); err != nil {
			t.Fatal(err)
		}
	}
	publish("old-r1", false, "stored before the watch") // not seen: the watch starts after it

	w, err := dlq.WatchReplayResults(ctxFor(t), b.js, instance)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"old-r1", "ok-r2", "bad-r3", "none-r4"} {
		w.Expect(dlq.Replayed{Seq: uint64(i + 1), Tool: "echo", NewID: id})
	}
	w.Expect(dlq.Replayed{Seq: 5, NewID: "skipped-r5", Err: dlq.ErrNotFound}) // not waited for
	publish("ok-r2", false, "fine")
	publish("ok-r2", false, "a duplicate") // the first one counts
	publish("bad-r3", true, "not found")
	publish("other-r9", false, "not expected")

	var got []string
	failed := w.Wait(ctxFor(t), 2*time.Second, func(r dlq.Replayed, res *envelope.Result) {
		if res == nil {
			got = append(got, fmt.Sprintf("%d %s none", r.Seq, r.NewID))
			return
		}
		got = append(got, fmt.Sprintf("%d %s %v %s", r.Seq, r.NewID, res.IsError, res.Content.Text()))
	})
	slices.Sort(got)
	want := []string{"1 old-r1 none", "2 ok-r2 false fine", "3 bad-r3 true not found", "4 none-r4 none"}
	if failed != 3 || !slices.Equal(got, want) {
		t.Errorf("Wait = %d, %q; want 3, %q", failed, got, want)
	}
	w.Stop()
	eventually(t, "the replay's result consumer deleted", func() bool {
		s, err := b.js.Stream(ctxFor(t), jetstream.StreamResults)
		if err != nil {
			return false
		}
		info, err := s.Info(ctxFor(t))
		return err == nil && info.State.Consumers == 0
	})
}
