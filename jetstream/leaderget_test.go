package jetstream_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
)

// TestCallsStreamPageable does what `nats stream view TOOL_CALLS` does on
// a work-queue stream: one direct get after another on
// $JS.API.DIRECT.GET.TOOL_CALLS, each asking for the first message at or
// after a sequence on any subject. Every queued call is listed in order,
// the end answers 404, and nothing is taken from the queue: the calls are
// still there for the consumers afterwards.
func TestCallsStreamPageable(t *testing.T) {
	t.Parallel()
	_, nc, j := natstest.StartProvisioned(t)
	ctx := testContext(t)
	c, err := jetstream.EnsureConsumer(ctx, j, jetstream.ConsumerSpec{Tool: "view"})
	if err != nil {
		t.Fatal(err)
	}
	subjects := []string{jetstream.CallSubject("view"), jetstream.CallSubject("other"), jetstream.CallSubject("view")}
	for i, s := range subjects {
		if _, err := j.Publish(ctx, s, []byte("call "+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}

	var got []string
	for seq := uint64(1); ; {
		req, _ := json.Marshal(map[string]any{"seq": seq, "next_by_subj": ">"})
		m, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+jetstream.StreamCalls, req)
		if err != nil {
			t.Fatalf("direct get at %d: %v (is allow_direct off?)", seq, err)
		}
		if status := m.Header.Get("Status"); status != "" {
			if status != "404" {
				t.Fatalf("direct get at %d: status %s %s", seq, status, m.Header.Get("Description"))
			}
			break
		}
		got = append(got, m.Header.Get(js.SubjectHeader)+" "+string(m.Data))
		n, err := strconv.ParseUint(m.Header.Get(js.SequenceHeader), 10, 64)
		if err != nil {
			t.Fatalf("direct get at %d: sequence header: %v", seq, err)
		}
		seq = n + 1
	}
	want := []string{"tools.call.view call 0", "tools.call.other call 1", "tools.call.view call 2"}
	if len(got) != len(want) {
		t.Fatalf("paged %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("message %d = %q, want %q", i, got[i], want[i])
		}
	}

	s, err := j.Stream(ctx, jetstream.StreamCalls)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 3 {
		t.Fatalf("after paging: info %+v, %v; want 3 calls still queued", info, err)
	}
	msgs, err := c.Fetch(2, js.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range msgs.Messages() {
		n++
		_ = m.Ack()
	}
	if n != 2 {
		t.Errorf("the consumer got %d calls after paging, want 2", n)
	}
}

func TestGetMsgFromLeader(t *testing.T) {
	t.Parallel()
	_, _, j := natstest.StartProvisioned(t)
	ctx := testContext(t)
	for i, tool := range []string{"a", "b", "a"} {
		msg := &nats.Msg{Subject: jetstream.CallSubject(tool), Data: []byte(strconv.Itoa(i)), Header: nats.Header{}}
		msg.Header.Set("Toolpool-Test", "h"+strconv.Itoa(i))
		if _, err := j.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}

	m, err := jetstream.GetMsgFromLeader(ctx, j, jetstream.StreamCalls, 2, "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Sequence != 2 || m.Subject != "tools.call.b" || string(m.Data) != "1" || m.Header.Get("Toolpool-Test") != "h1" || m.Time.IsZero() {
		t.Errorf("message 2 = %+v, want seq 2 on tools.call.b with data 1, header h1 and a time", m)
	}

	m, err = jetstream.GetMsgFromLeader(ctx, j, jetstream.StreamCalls, 2, jetstream.CallSubject("a"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Sequence != 3 || string(m.Data) != "2" {
		t.Errorf("next of tools.call.a from 2 = seq %d data %q, want seq 3 data 2", m.Sequence, m.Data)
	}

	if _, err := jetstream.GetMsgFromLeader(ctx, j, jetstream.StreamCalls, 4, jetstream.CallSubject("a")); !errors.Is(err, js.ErrMsgNotFound) {
		t.Errorf("next of tools.call.a from 4 = %v, want ErrMsgNotFound", err)
	}
	if _, err := jetstream.GetMsgFromLeader(ctx, j, jetstream.StreamCalls, 99, ""); !errors.Is(err, js.ErrMsgNotFound) {
		t.Errorf("message 99 = %v, want ErrMsgNotFound", err)
	}
	if _, err := jetstream.GetMsgFromLeader(ctx, j, "NO_SUCH_STREAM", 1, ""); !errors.Is(err, js.ErrStreamNotFound) {
		t.Errorf("a missing stream = %v, want ErrStreamNotFound", err)
	}

	// Without a deadline of its own, the JetStream context's default
	// timeout bounds the request.
	m, err = jetstream.GetMsgFromLeader(t.Context(), j, jetstream.StreamCalls, 1, "")
	if err != nil || m.Sequence != 1 {
		t.Errorf("message 1 without a deadline = %+v, %v", m, err)
	}
}

// TestGetMsgFromLeaderAPIPrefix reads through JetStream contexts made with
// an API prefix: the request goes under that prefix, with or without its
// trailing dot.
func TestGetMsgFromLeaderAPIPrefix(t *testing.T) {
	t.Parallel()
	_, nc, j := natstest.StartProvisioned(t)
	ctx := testContext(t)
	if _, err := j.Publish(ctx, jetstream.CallSubject("d"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"$JS.API", "$JS.API."} {
		jp, err := js.NewWithAPIPrefix(nc, prefix)
		if err != nil {
			t.Fatal(err)
		}
		if m, err := jetstream.GetMsgFromLeader(ctx, jp, jetstream.StreamCalls, 1, ""); err != nil || string(m.Data) != "x" {
			t.Errorf("through prefix %q: %+v, %v", prefix, m, err)
		}
	}
	jp, err := js.NewWithAPIPrefix(nc, "$JS.NOWHERE.API")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jetstream.GetMsgFromLeader(ctx, jp, jetstream.StreamCalls, 1, ""); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("through a prefix nothing answers: %v, want no responders", err)
	}
}
