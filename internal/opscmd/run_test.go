package opscmd

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/cli"
)

// stubPool is a Pool that records what run asks of it and starts
// nothing: its Serve fails with serveErr. The run tests that start a real
// pool are cmd/orchestrator's, on serve's.
type stubPool struct {
	natsURL  string
	serveErr error
	served   bool
	removed  bool
}

func (p *stubPool) Register(fs *flag.FlagSet) { fs.StringVar(&p.natsURL, "nats-url", "", "the server") }

func (p *stubPool) Check(func(string) bool) error { return nil }

func (p *stubPool) NATSURL() string { return p.natsURL }

func (p *stubPool) Logger(io.Writer) (*slog.Logger, error) { return slog.New(slog.DiscardHandler), nil }

func (p *stubPool) TempDataDir(string) (func(), error) { return func() { p.removed = true }, nil }

func (p *stubPool) Serve(context.Context, *slog.Logger, func(context.Context, *toolpool.Orchestrator)) error {
	p.served = true
	return p.serveErr
}

// runOn runs "orchestrator run" with args on pool.
func runOn(t *testing.T, pool Pool, args ...string) (int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := &cli.Command{Name: "orchestrator", Commands: []*cli.Command{Run(pool)}}
	code := cli.Main(t.Context(), root, append([]string{"run"}, args...), &stdout, &stderr)
	return code, stdout.String() + stderr.String()
}

// Without --api, run starts the pool it is given, in a temporary store
// removed at the end; a pool that does not start is exit 2, "no pool".
func TestRunOnItsPool(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "k")
	p := &stubPool{serveErr: errors.New("no server today")}
	code, out := runOn(t, p, "--task", "x")
	if code != 2 || !strings.Contains(out, "orchestrator run: no pool to run the tools on: no server today") {
		t.Errorf("exit %d: %s", code, out)
	}
	if !p.served || !p.removed {
		t.Errorf("served %v, temporary store removed %v; want both", p.served, p.removed)
	}
}

// With --api the pool is not started, and --api goes with no --nats-url.
func TestRunWithAPINotOnItsPool(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "k")
	p := &stubPool{}
	if code, out := runOn(t, p, "--task", "x", "--api", "http://127.0.0.1:1"); code != 2 || !strings.Contains(out, "no pool") || p.served {
		t.Errorf("exit %d, served %v: %s", code, p.served, out)
	}
	if code, out := runOn(t, &stubPool{}, "--task", "x", "--api", "http://127.0.0.1:1", "--nats-url", "nats://127.0.0.1:1"); code != 2 ||
		!strings.Contains(out, "give --api or --nats-url, not both") {
		t.Errorf("--api and --nats-url: exit %d: %s", code, out)
	}
}
