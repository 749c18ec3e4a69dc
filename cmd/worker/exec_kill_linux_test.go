package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// execKillCatalog has two exec tools whose shell writes its pid and its
// two background children's to a file named in the input, then waits:
// hold with a long timeout, brief with a short one.
const execKillCatalog = `tools:
  - name: hold
    description: Starts two sleeps in the background and waits.
    input_schema: {type: object}
    timeout: 10m
    retry: {max_attempts: 1}
    backend: exec
    exec:
      command: [sh, -c, '
        f=$(cat | sed -e "s/.*\"file\": *\"\([^\"]*\)\".*/\1/");
        sleep 300 & a=$!; sleep 300 & b=$!;
        echo "$$ $a $b" > "$f.tmp" && mv "$f.tmp" "$f";
        wait']
  - name: brief
    description: The same, with a short timeout.
    input_schema: {type: object}
    timeout: 5s
    retry: {max_attempts: 1}
    backend: exec
    exec:
      command: [sh, -c, '
        f=$(cat | sed -e "s/.*\"file\": *\"\([^\"]*\)\".*/\1/");
        sleep 300 & a=$!; sleep 300 & b=$!;
        echo "$$ $a $b" > "$f.tmp" && mv "$f.tmp" "$f";
        wait']
`

// alive reports whether pid is a process that has not ended (a zombie
// waiting for its reaper has ended).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// readPids waits for the shell of a call to write its pid and its
// children's to file.
func readPids(t *testing.T, file string, limit time.Duration) []int {
	t.Helper()
	var pids []int
	natstest.Eventually(t, limit, "the exec tool's shell wrote its pids", func() bool {
		data, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		pids = pids[:0]
		for f := range strings.FieldsSeq(string(data)) {
			n, err := strconv.Atoi(f)
			if err != nil || n <= 1 {
				t.Fatalf("pid file %q", data)
			}
			pids = append(pids, n)
		}
		return len(pids) == 3
	})
	t.Cleanup(func() { // whatever the test found, leave nothing running
		for _, p := range pids {
			if alive(p) {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
	})
	return pids
}

// TestExecToolDiesWithItsWorker: a worker process killed with SIGKILL takes
// its exec tool's processes with it, the shell and the children it started
// in the background, within seconds; and a tool's timeout kills the
// shell's children too.
func TestExecToolDiesWithItsWorker(t *testing.T) {
	t.Parallel()
	bin := buildWorker(t)
	srv, _, j := natstest.StartProvisioned(t)
	dir := t.TempDir()
	cat := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(cat, []byte(execKillCatalog), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d, err := dispatch.New(dispatch.Config{JS: j, Catalog: discovery.StaticCatalog("hold", "brief"), Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { stopped, stop := context.WithCancel(context.Background()); stop(); _ = d.Stop(stopped) }()
	w := startWorker(t, bin, srv.ClientURL(), "exec-doomed", nil, "--demo-tools=false", "--tools", cat)

	call := func(ctx context.Context, tool, file string) (envelope.Result, error) {
		in, _ := json.Marshal(map[string]string{"file": file})
		res, err := d.Dispatch(ctx, "", []envelope.ToolUseBlock{{Type: "tool_use", ID: "toolu_" + tool, Name: tool, Input: in}})
		if err != nil {
			return envelope.Result{}, err
		}
		return res[0], nil
	}

	// The timeout: the shell and both of its children are gone when the
	// result comes.
	briefFile := filepath.Join(dir, "brief.pids")
	res, err := call(ctx, "brief", briefFile)
	if err != nil || !res.IsError {
		t.Fatalf("brief: %+v, %v; want a timeout", res, err)
	}
	for _, pid := range readPids(t, briefFile, 5*time.Second) {
		natstest.Eventually(t, 10*time.Second, fmt.Sprintf("pid %d of brief's group gone after its timeout", pid), func() bool { return !alive(pid) })
	}

	// The kill -9 of the worker.
	holdFile := filepath.Join(dir, "hold.pids")
	callCtx, stopCall := context.WithCancel(ctx)
	defer stopCall()
	go func() { _, _ = call(callCtx, "hold", holdFile) }()
	pids := readPids(t, holdFile, time.Minute)
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("pid %d of hold's group is not running before the kill", pid)
		}
	}
	if err := w.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-w.Done()
	killed := time.Now()
	for _, pid := range pids {
		natstest.Eventually(t, 10*time.Second, fmt.Sprintf("pid %d of hold's group gone after its worker's kill -9", pid), func() bool { return !alive(pid) })
	}
	t.Logf("the exec tool's processes were gone %v after the worker's kill -9", time.Since(killed).Round(time.Millisecond))
}
