package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/testbin"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// TestWorkerServesExampleCatalog runs the worker binary with the example
// catalog: it starts, announces every tool of the catalog (its builtin
// entries included), and withdraws them when it stops on SIGTERM.
func TestWorkerServesExampleCatalog(t *testing.T) {
	t.Parallel()
	bin := buildWorker(t)
	srv, _, j := natstest.StartProvisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The bucket, made before the worker comes, with a TTL longer than the
	// test: only a withdrawal removes the worker's tools.
	bucket, _, err := discovery.OpenBucket(ctx, j, discovery.BucketConfig{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	live, err := discovery.NewCatalog(discovery.CatalogConfig{JetStream: j, Logger: natstest.Logger(t),
		ProbeInterval: 100 * time.Millisecond, GoneAfter: time.Second})
	if err == nil {
		err = live.Start(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer live.Stop(context.Background())

	const token = "example-secret-token-42"
	cmd := exec.Command(bin, "--nats-url", srv.ClientURL(), "--tools", filepath.Join("..", "..", "examples", "tools.yaml"),
		"--workspace", t.TempDir(), "--id", "catalog-worker", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "WEATHER_API_TOKEN="+token)
	var logs natstest.LockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
	}()

	want := []string{"echo_json", "get_weather", "list_dir", "read_file", "shout", "write_file"}
	deadline := time.Now().Add(time.Minute)
	for {
		names := live.Names(ctx)
		if hasAll(names, want) {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the worker exited (%v) before announcing its tools:\n%s", err, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker's tools never appeared; live: %v\n%s", names, logs.String())
		}
	}
	if ws := live.Workers(ctx, "shout"); len(ws) != 1 || ws[0].WorkerID != "catalog-worker" || ws[0].Timeout != 5*time.Second || ws[0].MaxAttempts != 2 {
		t.Errorf("shout's workers: %+v", ws)
	}
	// The catalog's cost, cache and approval reach the orchestrators.
	if w, _ := live.Lookup(ctx, "get_weather"); w.Cost != 2 || w.Cache == nil || w.Cache.Scope != "global" || w.Version == "" {
		t.Errorf("get_weather as the live catalog answers it: %+v", w)
	}
	if wf, _ := live.Lookup(ctx, "write_file"); wf.Approval == nil || len(wf.Approval.When) != 2 || wf.Approval.Timeout != 30*time.Minute {
		t.Errorf("write_file as the live catalog answers it: %+v", wf)
	}
	for _, d := range live.Definitions(ctx) {
		if d.Name == "read_file" && !strings.HasPrefix(d.Description, "Reads a text file of the project workspace.") {
			t.Errorf("read_file's description is not the catalog's: %q", d.Description)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Errorf("the worker exited with %v after SIGTERM:\n%s", err, logs.String())
	}
	// Withdrawn on the clean stop (the deletions reach the catalog's watch
	// shortly after).
	deadline = time.Now().Add(30 * time.Second)
	for names := live.Names(ctx); len(names) != 0; names = live.Names(ctx) {
		if time.Now().After(deadline) {
			// Tell a withdrawal that did not happen from a watch that missed it.
			var keys []string
			if lister, err := bucket.ListKeys(ctx); err != nil {
				keys = []string{"(keys: " + err.Error() + ")"}
			} else {
				for k := range lister.Keys() {
					keys = append(keys, k)
				}
			}
			t.Fatalf("still live after a clean stop: %v; keys in the bucket: %v\nworker output:\n%s", names, keys, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the worker's logs hold the token:\n%s", logs.String())
	}
}

// TestCatalogWorkerServesOnlyItsCatalog: a worker started as the README
// shows (--nats-url and --tools, nothing else) serves the catalog's tools
// and no built-in tool on a workspace of its own, which other workers
// would not share.
func TestCatalogWorkerServesOnlyItsCatalog(t *testing.T) {
	t.Parallel()
	bin := buildWorker(t)
	srv, _, j := natstest.StartProvisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	catalog := filepath.Join(dir, "tools.yaml")
	yaml := "tools:\n  - name: shout\n    description: Upper-cases its input.\n" +
		"    input_schema: {type: object, properties: {text: {type: string}}, required: [text]}\n" +
		"    timeout: 5s\n    backend: exec\n    exec: {command: [tr, \"[:lower:]\", \"[:upper:]\"]}\n"
	if err := os.WriteFile(catalog, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	metricsAddr := natstest.FreeAddr(t)
	cmd := exec.Command(bin, "--nats-url", srv.ClientURL(), "--tools", catalog, "--metrics", metricsAddr, "--id", "shouter")
	cmd.Dir = dir // where a default ./workspace would be made
	var logs natstest.LockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	// Ready once its tools are announced.
	deadline := time.Now().Add(time.Minute)
	for {
		if code, _ := httpGet(t, "http://"+metricsAddr+"/readyz"); code == http.StatusOK {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the worker exited (%v):\n%s", err, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker never got ready:\n%s", logs.String())
		}
	}
	bucket, _, err := discovery.OpenBucket(ctx, j, discovery.BucketConfig{})
	if err != nil {
		t.Fatal(err)
	}
	lister, err := bucket.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	if want := []string{discovery.Key("shout", "shouter")}; !slices.Equal(keys, want) {
		t.Errorf("announced %v, want only the catalog's tool %v", keys, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "workspace")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the worker made a workspace of its own (%v)", err)
	}
}

// TestWorkerRefusesBadCatalog: a bad catalog stops the worker at start with
// a message naming the file, the tool and the field.
func TestWorkerRefusesBadCatalog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tools.yaml")
	bad := "tools:\n  - name: weather\n    description: d\n    input_schema: {type: object}\n    retry: {max_attempts: 0}\n    backend: exec\n    exec: {command: [cat]}\n"
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	code := run(t.Context(), []string{"--tools", path, "--builtin-tools=false", "--nats-url", "nats://127.0.0.1:1"}, &stderr)
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	want := "worker: " + path + `:5: tool "weather": retry.max_attempts: must be between 1 and 100, got 0`
	if got := strings.TrimSpace(stderr.String()); got != want {
		t.Errorf("stderr\n got %s\nwant %s", got, want)
	}
}

// buildWorker builds the worker binary (once per go test run: testbin
// shares it).
func buildWorker(t *testing.T) string {
	t.Helper()
	return testbin.Program(t, "./cmd/worker")
}

// TestKilledWorkerProcessExpires: a worker process killed with SIGKILL
// cannot withdraw its tools; they disappear once the TTL passes.
func TestKilledWorkerProcessExpires(t *testing.T) {
	t.Parallel()
	bin := buildWorker(t)
	srv, _, j := natstest.StartProvisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	live, err := discovery.NewCatalog(discovery.CatalogConfig{JetStream: j, Bucket: discovery.BucketConfig{TTL: time.Second}, Logger: natstest.Logger(t)})
	if err == nil {
		err = live.Start(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer live.Stop(context.Background())
	cmd := exec.Command(bin, "--nats-url", srv.ClientURL(), "--demo-tools", "--builtin-tools=false", "--id", "doomed")
	var logs natstest.LockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	deadline := time.Now().Add(time.Minute)
	for !slices.Equal(live.Names(ctx), []string{"echo", "flaky", "sleep"}) {
		select {
		case err := <-exited:
			t.Fatalf("the worker exited (%v):\n%s", err, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker's tools never appeared:\n%s", logs.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	for names := live.Names(ctx); len(names) != 0; names = live.Names(ctx) {
		if time.Now().After(deadline) {
			t.Fatalf("a killed worker's tools are still live: %v", names)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// TestUsageSaysDefaultOnce: no flag of the worker says its default twice.
func TestUsageSaysDefaultOnce(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	if code := run(t.Context(), []string{"-h"}, &stderr); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
	var entries []string
	for line := range strings.SplitSeq(stderr.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			entries = append(entries, line)
		case strings.HasPrefix(line, "    \t") && len(entries) > 0:
			entries[len(entries)-1] += "\n" + line
		}
	}
	if len(entries) < 10 {
		t.Fatalf("too few flags in the usage:\n%s", stderr.String())
	}
	for _, e := range entries {
		if n := strings.Count(strings.ToLower(e), "default"); n > 1 {
			t.Errorf("a flag says default %d times:\n%s", n, e)
		}
	}
}

// TestKilledWorkerAnsweredNoWorker: after a kill -9 of the only worker of a
// tool, a long-running orchestrator's catalog stops counting it well before
// its announcement expires (here the bucket's TTL is an hour), so a new call
// to the tool is answered at once with no_worker instead of waiting for its
// deadline. The catalog probes the workers' liveness subjects every 100 ms
// and lets a worker go after 1 s without a subscriber (defaults 1 s and
// 5 s, which only make it take longer).
func TestKilledWorkerAnsweredNoWorker(t *testing.T) {
	t.Parallel()
	bin := buildWorker(t)
	srv, _, j := natstest.StartProvisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, _, err := discovery.OpenBucket(ctx, j, discovery.BucketConfig{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	live, err := discovery.NewCatalog(discovery.CatalogConfig{JetStream: j, Logger: natstest.Logger(t),
		ProbeInterval: 100 * time.Millisecond, GoneAfter: time.Second})
	if err == nil {
		err = live.Start(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer live.Stop(context.Background())
	d, err := dispatch.New(dispatch.Config{JS: j, Catalog: live, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { stopped, stop := context.WithCancel(context.Background()); stop(); _ = d.Stop(stopped) }()
	call := func(id string, timeout time.Duration) envelope.Result {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		res, err := d.Dispatch(cctx, "", []envelope.ToolUseBlock{{Type: "tool_use", ID: id, Name: "echo", Input: json.RawMessage(`{"text":"hi"}`)}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}

	cmd := exec.Command(bin, "--nats-url", srv.ClientURL(), "--demo-tools", "--id", "only-echo")
	var logs natstest.LockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, ok := live.Lookup(ctx, "echo"); ok {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the worker exited (%v):\n%s", err, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("echo never announced:\n%s", logs.String())
		}
	}
	if r := call("toolu_before", time.Minute); r.IsError || r.Content.Text() != "hi" {
		t.Fatalf("echo before the kill: %+v", r)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	killed := time.Now()
	// Generous: the catalog needs GoneAfter and a probe.
	const bound = time.Minute
	for {
		if info, ok := live.Lookup(ctx, "echo"); !ok && info.NoWorker {
			break
		}
		if time.Since(killed) > bound {
			t.Fatalf("echo still counted as served %v after its only worker was killed", bound)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the killed worker stopped counting after %v", time.Since(killed).Round(time.Millisecond))
	// Well within its timeout: answered, not waited for.
	r := call("toolu_after", 2*time.Minute)
	if !r.IsError || r.Code != dispatch.CodeNoWorker || !strings.HasPrefix(r.Content.Text(), "No worker serves the tool echo right now") {
		t.Errorf("a call after the kill: %+v %q", r, r.Content.Text())
	}
}
