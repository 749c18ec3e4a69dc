package catalog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"

	js "github.com/nats-io/nats.go/jetstream"
)

// helperEnv, set to "1", makes the test binary act as the command of an
// exec tool (see helperMain) instead of running the tests. Exec tools in
// these tests list it in their env allow-list, which also tests that the
// allow-list passes listed variables through.
const helperEnv = "TOOLPOOL_CATALOG_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(helperMain(os.Args[1:]))
	}
	goleak.VerifyTestMain(m,
		// The HTTP clients' idle connections and the NATS server's
		// background work wind down on their own schedule.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).Start.func1"),
	)
}

// helperMain is the test binary acting as a command. args[0] is the mode.
func helperMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "helper: no mode")
		return 2
	}
	switch args[0] {
	case "cat": // stdin to stdout
		_, _ = io.Copy(os.Stdout, os.Stdin)
		return 0
	case "env": // the environment, one variable a line
		fmt.Print(strings.Join(os.Environ(), "\n"))
		return 0
	case "exit": // exit CODE: many lines on stderr, then exit with CODE
		code, _ := strconv.Atoi(args[1])
		for i := 1; i <= 200; i++ {
			fmt.Fprintf(os.Stderr, "stderr line %d of the helper\n", i)
		}
		fmt.Fprintln(os.Stderr, "last words: the input was rejected")
		return code
	case "tempfail": // tempfail FILE N: exit 75 on the first N runs counted in FILE
		n, _ := strconv.Atoi(args[2])
		data, _ := os.ReadFile(args[1])
		runs := len(data) + 1
		_ = os.WriteFile(args[1], append(data, 'x'), 0o644)
		if runs <= n {
			fmt.Fprintln(os.Stderr, "the backend is busy, try later")
			return ExitTempFail
		}
		fmt.Printf("ok after %d runs", runs)
		return 0
	case "big": // big N: N bytes on stdout and on stderr
		n, _ := strconv.Atoi(args[1])
		chunk := strings.Repeat("x", 1000)
		for written := 0; written < n; written += len(chunk) {
			fmt.Print(chunk[:min(len(chunk), n-written)])
			fmt.Fprint(os.Stderr, chunk[:min(len(chunk), n-written)])
		}
		return 0
	case "hang": // hang PIDFILE: ignore SIGTERM, start a grandchild that does too, write both pids
		signal.Ignore(syscall.SIGTERM)
		self, _ := os.Executable()
		gc := exec.Command(self, "grandchild")
		gc.Env = append(os.Environ(), helperEnv+"=1")
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pids := fmt.Sprintf("%d\n%d\n", os.Getpid(), gc.Process.Pid)
		_ = os.WriteFile(args[1]+".tmp", []byte(pids), 0o644)
		_ = os.Rename(args[1]+".tmp", args[1])
		time.Sleep(time.Hour)
		return 0
	case "grandchild":
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour)
		return 0
	case "sleep": // sleep until killed (SIGTERM ends it)
		time.Sleep(time.Hour)
		return 0
	}
	fmt.Fprintln(os.Stderr, "helper: unknown mode", args[0])
	return 2
}

// helperEntry is the YAML of an exec tool running the helper in mode.
func helperEntry(t testing.TB, name, settings string, mode ...string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{strconv.Quote(self)}
	for _, m := range mode {
		argv = append(argv, strconv.Quote(m))
	}
	return fmt.Sprintf(`  - name: %s
    description: A test helper.
    input_schema: {type: object}
%s    backend: exec
    exec:
      command: [%s]
      env: [%s, FOO]
      term_grace: 200ms
      max_output_bytes: 1000
`, name, settings, strings.Join(argv, ", "), helperEnv)
}

// helperLookupEnv is the environment the catalog sees: the helper switch,
// FOO (listed) and BAR (not listed).
var helperLookupEnv = env(helperEnv, "1", "FOO", "foo-value", "BAR", "bar-value")

// loadTools parses a catalog made of entries and returns its tools by name.
func loadTools(t testing.TB, opts Options, entries ...string) map[string]tools.Tool {
	t.Helper()
	if opts.LookupEnv == nil {
		opts.LookupEnv = helperLookupEnv
	}
	f, err := Parse(filepath.Join(t.TempDir(), "tools.yaml"), []byte("tools:\n"+strings.Join(entries, "")), opts)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	ts, err := f.Tools(nil)
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	out := map[string]tools.Tool{}
	for _, tool := range ts {
		out[tool.Name] = tool
	}
	return out
}

// pool is a whole toolpool in the test: an embedded JetStream server, one
// worker serving reg on a connection of its own, and a dispatcher.
type pool struct {
	d *dispatch.Dispatcher
}

func startPool(t *testing.T, ts ...tools.Tool) *pool {
	t.Helper()
	return startPoolLogging(t, natstest.Logger(t), ts...)
}

// startPoolLogging is startPool with the worker and the dispatcher logging
// to log.
func startPoolLogging(t *testing.T, log *slog.Logger, ts ...tools.Tool) *pool {
	t.Helper()
	srv, _, j := natstest.StartProvisioned(t)
	reg := tools.NewRegistry()
	for _, tool := range ts {
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	wnc := natstest.Connect(t, srv.ClientURL())
	wjs, err := js.New(wnc)
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Config{JetStream: wjs, Registry: reg, Logger: log, DrainTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	d, err := dispatch.New(dispatch.Config{JS: j, Catalog: discovery.RegistryCatalog(reg), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopped, stop := context.WithCancel(context.Background()); stop(); _ = d.Stop(stopped) })
	return &pool{d: d}
}

// callSeq numbers the calls of the tests, for unique call ids.
var callSeq atomic.Int64

// call sends one call through the pool and returns its result.
func (p *pool) call(t *testing.T, tool, input string) envelope.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := p.d.Dispatch(ctx, "", []envelope.ToolUseBlock{{
		Type: "tool_use", ID: fmt.Sprintf("toolu_%s_%d", strings.ReplaceAll(t.Name(), "/", "_"), callSeq.Add(1)), Name: tool, Input: []byte(input),
	}})
	if err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	return res[0]
}
