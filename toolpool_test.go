package toolpool_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/worker"
)

// pool is an embedded server with the streams provisioned, a connection,
// and a registry holding the tool "hold", which blocks until release is
// closed (or its call is cancelled, answering with the cancel's cause).
type pool struct {
	nc      *nats.Conn
	reg     *toolpool.Registry
	release chan struct{}
	started chan struct{}
	causes  chan error // why a call's context ended
}

func setup(t *testing.T) *pool {
	t.Helper()
	_, nc, _ := natstest.StartProvisioned(t)
	p := &pool{nc: nc, reg: toolpool.NewRegistry(), release: make(chan struct{}), started: make(chan struct{}, 16), causes: make(chan error, 16)}
	p.reg.MustRegister(toolpool.Tool{
		Name: "hold", Description: "Waits to be released.", Timeout: time.Minute,
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(ctx context.Context, _ json.RawMessage) (toolpool.Output, error) {
			p.started <- struct{}{}
			select {
			case <-p.release:
				return toolpool.Text("released"), nil
			case <-ctx.Done():
				p.causes <- context.Cause(ctx)
				return toolpool.Output{}, context.Cause(ctx)
			}
		},
	})
	return p
}

func (p *pool) start(t *testing.T) (*toolpool.Server, *toolpool.Orchestrator) {
	t.Helper()
	srv, err := toolpool.NewServer(toolpool.ServerConfig{Conn: p.nc, Registry: p.reg, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	orch, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: p.nc, Checks: srv.Checks(), Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := orch.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // at once: a turn still waiting fails
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = orch.Stop(ctx)
	})
	return srv, orch
}

type turn struct {
	res []toolpool.Result
	err error
}

func (p *pool) dispatch(orch *toolpool.Orchestrator, id string) <-chan turn {
	out := make(chan turn, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := orch.Dispatch(ctx, "s", []toolpool.ToolUse{{ID: id, Name: "hold", Input: json.RawMessage(`{}`)}})
		out <- turn{res, err}
	}()
	return out
}

// A bad config is refused by the constructor, with the field named.
func TestConfigsNameTheBadField(t *testing.T) {
	t.Parallel()
	p := setup(t)
	empty := toolpool.NewRegistry()
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"server without Conn", func() error { _, err := toolpool.NewServer(toolpool.ServerConfig{Registry: p.reg}); return err }, "ServerConfig.Conn"},
		{"server without Registry", func() error { _, err := toolpool.NewServer(toolpool.ServerConfig{Conn: p.nc}); return err }, "ServerConfig.Registry"},
		{"server with no tool", func() error {
			_, err := toolpool.NewServer(toolpool.ServerConfig{Conn: p.nc, Registry: empty})
			return err
		}, "ServerConfig.Registry"},
		{"server with negative Workers", func() error {
			_, err := toolpool.NewServer(toolpool.ServerConfig{Conn: p.nc, Registry: p.reg, Workers: -1})
			return err
		}, "ServerConfig.Workers"},
		{"server with bad worker config", func() error {
			_, err := toolpool.NewServer(toolpool.ServerConfig{Conn: p.nc, Registry: p.reg, Concurrency: -1})
			return err
		}, "Concurrency"},
		{"orchestrator without Conn", func() error { _, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{}); return err }, "OrchestratorConfig.Conn"},
		{"orchestrator with 7 replicas", func() error {
			_, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: p.nc, Replicas: 7})
			return err
		}, "OrchestratorConfig.Replicas"},
		{"orchestrator with a dotted instance", func() error {
			_, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: p.nc, Instance: "orch.1"})
			return err
		}, "OrchestratorConfig.Instance"},
		{"orchestrator with a short API key", func() error {
			_, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: p.nc, APIKeys: []toolpool.APIKey{{Tenant: "t", Key: "short"}}})
			return err
		}, "OrchestratorConfig.APIKeys: keys[0].key"},
		{"orchestrator with an open console off loopback", func() error {
			_, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: p.nc, Console: true})
			return err
		}, "OrchestratorConfig.ConsoleTokens"},
		{"orchestrator with a short operator token", func() error {
			_, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: p.nc, Console: true, ConsoleTokens: map[string]string{"alice": "short"}})
			return err
		}, `operator "alice"`},
		{"HTTP server with a bad origin", func() error {
			return toolpool.HTTPServerConfig{Addr: "127.0.0.1:0", AllowedOrigins: []string{"not an origin"}}.WithDefaults().Validate()
		}, "HTTPServerConfig.AllowedOrigins"},
		{"embedded server with a negative MaxPayload", func() error {
			_, err := toolpool.NewEmbedded(toolpool.EmbeddedConfig{MaxPayload: -1})
			return err
		}, "EmbeddedConfig.MaxPayload"},
		{"a catalog with a bad entry", func() error {
			file := filepath.Join(t.TempDir(), "tools.yaml")
			bad := "tools:\n  - name: weather\n    description: d\n    input_schema: {type: object}\n    retry: {max_attempts: 0}\n    backend: exec\n    exec: {command: [cat]}\n"
			if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := toolpool.LoadCatalog(toolpool.CatalogConfig{File: file})
			return err
		}, `tools.yaml:5: tool "weather": retry.max_attempts`},
		{"API keys with an unknown field", func() error {
			_, err := toolpool.ParseAPIKeys([]byte(`[{tenant: t, key: a-0123456789abcdef, tool: [echo]}]`), "keys.yaml")
			return err
		}, "keys.yaml"},
	} {
		if err := tc.err(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v; want one naming %s", tc.name, err, tc.want)
		}
	}
}

// Server.Stop drains: a call in progress finishes and is answered, and
// Stopped closes only when Stop returns.
func TestServerStopDrains(t *testing.T) {
	t.Parallel()
	p := setup(t)
	srv, orch := p.start(t)
	tr := p.dispatch(orch, "toolu_drain")
	<-p.started
	handler := srv.Handler()
	readyz := func() int {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code
	}
	if code := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz before Stop = %d; want 200", code)
	}
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stopped <- srv.Stop(ctx)
	}()
	// Stop is draining once the Server says so: not ready.
	natstest.Eventually(t, time.Minute, "the draining Server's /readyz to answer 503", func() bool {
		return readyz() == http.StatusServiceUnavailable
	})
	select {
	case <-srv.Stopped():
		t.Fatal("Stopped closed while a call was in progress")
	default:
	}
	close(p.release)
	if err := <-stopped; err != nil {
		t.Errorf("Stop = %v; want nil (the call finished in time)", err)
	}
	<-srv.Stopped()
	got := <-tr
	if got.err != nil || got.res[0].IsError || got.res[0].Content.Text() != "released" {
		t.Errorf("the call drained = %+v, %v; want its result", got.res, got.err)
	}
}

// When Stop's ctx ends first, the calls left are cancelled with the named
// cause (worker.ErrShutdown) and Stop says the drain did not finish.
func TestServerStopCancelsWithCause(t *testing.T) {
	t.Parallel()
	p := setup(t)
	srv, orch := p.start(t)
	_ = p.dispatch(orch, "toolu_cancel")
	<-p.started
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := srv.Stop(ctx); err == nil {
		t.Error("Stop = nil; want the drain's timeout")
	}
	<-srv.Stopped()
	// The call was handed back, not answered (it waits in the queue for
	// another worker); its handler saw the cause.
	select {
	case cause := <-p.causes:
		if !errors.Is(cause, worker.ErrShutdown) {
			t.Errorf("the call's context ended with %v; want worker.ErrShutdown", cause)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call still runs after Stop returned")
	}
}

// Each side serves its health and metrics: ready once started, not ready
// once the Server drains; the orchestrator's /readyz includes the
// Server's checks.
func TestHandlers(t *testing.T) {
	t.Parallel()
	p := setup(t)
	srv, orch := p.start(t)
	sh := httptest.NewServer(srv.Handler())
	defer sh.Close()
	oh := httptest.NewServer(orch.Handler())
	defer oh.Close()
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, u := range []string{sh.URL, oh.URL} {
		if code, body := get(u + "/readyz"); code != http.StatusOK {
			t.Errorf("%s/readyz = %d %s; want 200", u, code, body)
		}
		if code, body := get(u + "/metrics"); code != http.StatusOK || !strings.Contains(body, "toolpool_") {
			t.Errorf("%s/metrics = %d; want toolpool's metrics", u, code)
		}
	}
	if code, body := get(oh.URL + "/v1/tools"); code != http.StatusOK || !strings.Contains(body, `"hold"`) {
		t.Errorf("/v1/tools = %d %s; want the tool hold", code, body)
	}
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{sh.URL, oh.URL} {
		if code, body := get(u + "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "worker") {
			t.Errorf("%s/readyz after the Server stopped = %d %s; want 503 naming the worker", u, code, body)
		}
	}
}

// API keys and operator tokens read from a file and the environment come
// out as the root's types, as the file says them.
func TestLoadAPIKeysAndOperatorTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keysFile, tokensFile := filepath.Join(dir, "keys.yaml"), filepath.Join(dir, "ui.yaml")
	keysYAML := "keys:\n  - {tenant: a, name: ci-bot, key: a-0123456789abcdef, tools: [echo], weight: 3, priority: low, max_priority: high}\n"
	hash := strings.Repeat("ab", 32)
	env := map[string]string{
		toolpool.EnvAPIKeys:        `[{"tenant": "b", "sha256": "` + hash + `"}]`,
		toolpool.EnvOperatorTokens: "bob=bob-token-0123456789",
	}
	if err := os.WriteFile(keysFile, []byte(keysYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokensFile, []byte("alice: alice-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string { return env[k] }
	keys, err := toolpool.LoadAPIKeys(keysFile, getenv)
	if err != nil {
		t.Fatal(err)
	}
	want := []toolpool.APIKey{
		{Tenant: "a", Name: "ci-bot", Key: "a-0123456789abcdef", Tools: []string{"echo"}, Weight: 3, Priority: toolpool.PriorityLow, MaxPriority: toolpool.PriorityHigh},
		{Tenant: "b", SHA256: hash},
	}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("LoadAPIKeys = %+v, want %+v", keys, want)
	}
	tokens, err := toolpool.LoadOperatorTokens(tokensFile, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"alice": "alice-token-0123456789", "bob": "bob-token-0123456789"}; !reflect.DeepEqual(tokens, want) {
		t.Errorf("LoadOperatorTokens = %v, want %v", tokens, want)
	}
	if keys, err := toolpool.LoadAPIKeys("", func(string) string { return "" }); err != nil || keys != nil {
		t.Errorf("no keys given: %v, %v; want none", keys, err)
	}
}
