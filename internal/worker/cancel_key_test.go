package worker

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/tools"
)

// headerMsg is a delivered call message with a Nats-Msg-Id.
type headerMsg struct {
	benchMsg
	id string
}

func (m *headerMsg) Headers() nats.Header { return nats.Header{nats.MsgIdHdr: {m.id}} }

// A cancellation names its call by tool and key as well as by sequence: one
// whose sequence meets another call's message (TOOL_CALLS made again, or a
// forged or stale cancel) cancels nothing, held or remembered; the call's
// own, and that of its re-post (<key>.<n>), cancel it.
func TestCancelNamesItsCall(t *testing.T) {
	t.Parallel()
	echo := &served{tool: &tools.Registered{Tool: tools.Tool{Name: "echo"}}}
	cancel := func(w *Worker, tool, key string) {
		w.handleCancel(&nats.Msg{Subject: jetstream.CancelSubject(tool, key), Data: []byte("7")})
	}
	for _, tc := range []struct {
		name, msgID, tool, key string
		want                   bool
	}{
		{"its own", "k1", "echo", "k1", true},
		{"its re-post", "k1.2", "echo", "k1", true},
		{"another call's key", "k1", "echo", "k2", false},
		{"a key it only starts with", "k10", "echo", "k1", false},
		{"another tool", "k1", "sleep", "k1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Held: the cancellation finds the job.
			j := &job{msg: &headerMsg{id: tc.msgID}, served: echo}
			w := &Worker{seqs: map[uint64]*job{7: j}}
			cancel(w, tc.tool, tc.key)
			if got := j.cancelled.Load(); got != tc.want {
				t.Errorf("held job cancelled = %v, want %v", got, tc.want)
			}
			// Remembered: the cancellation came before the message.
			j = &job{msg: &headerMsg{id: tc.msgID}, served: echo}
			w = &Worker{seqs: map[uint64]*job{}}
			cancel(w, tc.tool, tc.key)
			if got := w.takeCancel(7, j); got != tc.want {
				t.Errorf("remembered cancellation taken = %v, want %v", got, tc.want)
			}
		})
	}
	// Garbage is ignored: no sequence, no key.
	w := &Worker{seqs: map[uint64]*job{}}
	w.handleCancel(&nats.Msg{Subject: jetstream.CancelSubject("echo", "k1"), Data: []byte("not a number")})
	w.handleCancel(&nats.Msg{Subject: jetstream.CancelSubjectPrefix + "echo", Data: []byte("7")})
	if len(w.cancels) != 0 {
		t.Errorf("garbage cancellations remembered: %v", w.cancels)
	}
}
