package e2e_test

import (
	"context"
	"encoding/json"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// startServerAt starts an embedded server storing in dataDir and listening
// on listen; the test's cleanup shuts it down.
func startServerAt(t *testing.T, dataDir, listen string) *embedded.Server {
	t.Helper()
	srv, err := embedded.Start(embedded.Options{Listen: listen, DataDir: dataDir, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// provision provisions the streams on a new connection to url.
func provision(t *testing.T, url string) (*nats.Conn, js.JetStream) {
	t.Helper()
	nc := natstest.Connect(t, url)
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := jetstream.Provision(ctx, j, jetstream.Config{}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	return nc, j
}

// A call queued while no worker runs survives a restart of the server and
// of the orchestrator: the server comes back on the same data directory, a
// worker starts, the call runs and its result is in TOOL_RESULTS. A
// dispatcher that kept waiting through the restart gets the result too.
func TestCallsSurviveServerRestart(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	var execs atomic.Int64
	reg := tools.NewRegistry()
	if err := reg.Register(countingTool("archive", anySchema, &execs)); err != nil {
		t.Fatal(err)
	}

	srv := startServerAt(t, dataDir, "127.0.0.1:0")
	url := srv.ClientURL()
	_, j := provision(t, url)

	// A call published by an orchestrator that then goes away with the
	// server.
	const instance = "before-restart"
	rawID := newCallID()
	data, err := envelope.EncodeCall(&envelope.Call{
		V: envelope.Version, ID: rawID, Tool: "archive", Input: json.RawMessage(`{"doc":1}`),
		ReplyTo: instance, CreatedAt: time.Now(), Deadline: time.Now().Add(10 * time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(jetstream.CallSubject("archive"))
	m.Data = data
	m.Header.Set(nats.MsgIdHdr, rawID)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := j.PublishMsg(ctx, m); err != nil {
		t.Fatalf("publish: %v", err)
	}

	// A call from a dispatcher that keeps waiting through the restart.
	p := &pool{t: t, srv: srv, js: j, reg: reg}
	p.o = pooltest.StartOrchestrator(t, j.Conn(), discovery.RegistryCatalog(reg))
	p.d = p.o.Dispatcher()
	waiting := toolUse("archive", `{"doc":2}`)
	turn := p.dispatchAsync(ctx, waiting)
	eventually(t, "both calls to be stored", func() bool { return streamState(t, j, jetstream.StreamCalls).Msgs == 2 })

	srv.Shutdown()
	if n := execs.Load(); n != 0 {
		t.Fatalf("%d executions before any worker ran", n)
	}
	// Same data directory, same address, so the dispatcher's connection
	// comes back.
	srv2 := startServerAt(t, dataDir, hostPort(t, url))
	// The orchestrator stops before srv2 does (cleanups run last first):
	// with no server, its stop would wait out a request's timeout (5 s).
	t.Cleanup(func() {
		stopped, stop := context.WithCancel(context.Background())
		stop()
		_ = p.o.Stop(stopped)
	})
	_, j2 := provision(t, srv2.ClientURL())
	if got := streamState(t, j2, jetstream.StreamCalls).Msgs; got != 2 {
		t.Fatalf("TOOL_CALLS holds %d calls after the restart, want 2", got)
	}
	startWorkerOn(t, srv2.ClientURL(), reg)

	var raw *envelope.Result
	eventually(t, "the queued call's result in TOOL_RESULTS", func() bool {
		msgs := streamMsgs(t, j2, jetstream.StreamResults, jetstream.ResultFilter(instance))
		if len(msgs) == 0 {
			return false
		}
		r, err := envelope.DecodeResult(msgs[0].Data)
		if err != nil {
			t.Fatalf("result does not decode: %v", err)
		}
		raw = r
		return true
	})
	if raw.CallID != rawID || raw.IsError || raw.Content.Text() != "done" {
		t.Errorf("result of the queued call: %+v; want %q for %s", raw, "done", rawID)
	}

	res := await(t, turn)[0]
	if res.CallID != waiting.ID || res.IsError || res.Content.Text() != "done" {
		t.Errorf("the dispatcher waiting through the restart got %+v; want %q for %s", res, "done", waiting.ID)
	}
	if n := execs.Load(); n != 2 {
		t.Errorf("executions = %d, want 2", n)
	}
}

// hostPort is the host:port of a nats:// URL.
func hostPort(t *testing.T, url string) string {
	t.Helper()
	const scheme = "nats://"
	if len(url) <= len(scheme) || url[:len(scheme)] != scheme {
		t.Fatalf("unexpected URL %q", url)
	}
	hp := url[len(scheme):]
	if _, _, err := net.SplitHostPort(hp); err != nil {
		t.Fatalf("URL %q: %v", url, err)
	}
	return hp
}
