package dispatch

import (
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// A result stored while the dispatcher's connection is down still reaches
// the waiting caller: the ordered result consumer resumes where it was,
// also when it had not seen any result before the outage.
func TestDispatchSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	slow := startWorker(t, b, "slow", func(*fakeWorker, *envelope.Call, nats.Header, reply) {})
	type out struct {
		res []envelope.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := b.d.Dispatch(timeout(t, 30*time.Second), "", []envelope.ToolUseBlock{use("toolu_r", "slow", `{}`)})
		done <- out{res, err}
	}()
	eventually(t, "the worker to take the call", func() bool { return slow.execs.Load() == 1 })

	u, err := url.Parse(b.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	b.srv.Shutdown()
	srv2, err := embedded.Start(embedded.Options{
		Listen:  u.Host,
		DataDir: filepath.Dir(b.srv.StoreDir()),
		Logger:  natstest.Logger(t),
	})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	b.srv = srv2 // shut down after the dispatcher and the worker stopped
	// Store the result at once on a fresh connection, most likely before the
	// dispatcher's connection is back (it waits ReconnectWait first).
	nc := natstest.Connect(t, srv2.ClientURL())
	key := envelope.CallKey("", "", "toolu_r", "slow", []byte(`{}`))
	data, err := envelope.EncodeResult(&envelope.Result{CallID: "toolu_r", Key: key, Tool: "slow", Content: envelope.Text("after the restart")})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishMsg(&nats.Msg{Subject: jetstream.ResultSubject(b.d.Instance(), key), Data: data}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	select {
	case o := <-done:
		if o.err != nil || o.res[0].IsError || o.res[0].Content.Text() != "after the restart" {
			t.Fatalf("Dispatch = %+v, %v", o.res, o.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the result stored after the restart never arrived")
	}
}
