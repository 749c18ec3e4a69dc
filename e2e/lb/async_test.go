package lb_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// asyncCall runs one async HTTP call through the proxy as an agent
// would: POST with Prefer: respond-async until it is accepted (the same
// message again after a connection error or a 5xx), then GET its
// Location with ?wait= until the answer is complete.
func asyncCall(ctx context.Context, s *stack, id string, accept func()) outcome {
	o := outcome{id: id, kind: "async", replicas: map[string]int{}}
	hdr := http.Header{"Prefer": {"respond-async"}, "Toolpool-Session": {"lb-async-" + id}}
	for attempt := 0; o.ref == ""; attempt++ {
		if ctx.Err() != nil {
			o.err = "not accepted before the budget ended"
			return o
		}
		resp, body, err := s.postCalls("?timeout=2m", hdr, napCall(id))
		switch {
		case err != nil || transient(resp.StatusCode):
			o.retries++
			time.Sleep(backoff(attempt, resp))
			continue
		case resp.StatusCode != http.StatusAccepted:
			o.err = fmt.Sprintf("POST: %s: %s", resp.Status, body)
			return o
		}
		o.replicas[resp.Header.Get(replicaHeader)]++
		o.ref = resp.Header.Get("Location")
		if !strings.HasPrefix(o.ref, "/v1/tool_calls/") {
			o.err = fmt.Sprintf("POST: 202 with Location %q", o.ref)
			return o
		}
	}
	// The first poll waits 1 s: once it is answered the call counts as
	// accepted, and the polls in flight at the kill are long ones.
	wait := "1s"
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			o.err = "no answer before the budget ended"
			return o
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.lbURL+o.ref+"?wait="+wait, nil)
		resp, body, err := s.do(req)
		if wait == "1s" && err == nil {
			accept()
			wait = "20s"
		}
		switch {
		case err != nil || transient(resp.StatusCode):
			o.retries++
			time.Sleep(backoff(attempt, resp))
			continue
		case resp.StatusCode == http.StatusAccepted:
			o.replicas[resp.Header.Get(replicaHeader)]++
			continue // still running: ?wait= paced the poll
		case resp.StatusCode != http.StatusOK:
			o.err = fmt.Sprintf("GET %s: %s: %s", o.ref, resp.Status, body)
			return o
		}
		o.replicas[resp.Header.Get(replicaHeader)]++
		return asyncOutcome(o, body)
	}
}

// asyncAgain reads a completed async call's answer once more.
func asyncAgain(ctx context.Context, s *stack, o outcome) outcome {
	again := outcome{id: o.id, kind: o.kind, ref: o.ref}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.lbURL+o.ref, nil)
	resp, body, err := s.do(req)
	switch {
	case err != nil:
		again.err = err.Error()
	case resp.StatusCode != http.StatusOK:
		again.err = fmt.Sprintf("GET %s: %s: %s", o.ref, resp.Status, body)
	default:
		again = asyncOutcome(again, body)
	}
	return again
}

// TestReplicaKilledUnderAsyncLoad runs 120 async HTTP calls and 120 MCP
// tasks through the proxy, more than four times the workers' slots (200
// and 200 before: the clients' polls, whose number grows with the calls
// and with how long each waits, were most of the package's CPU;
// runFailover checks calls of both kinds are still unanswered at the
// kill), and kills one replica with
// SIGKILL once every call is accepted and a quarter have started: every
// call completes and is retrievable through the proxy from the replica
// left (which adopts the dead one's calls when their lease lapses), none
// is lost, none has two results, and none ran twice (no worker and no
// NATS server died: docs/operations.md allows no second execution here).
func TestReplicaKilledUnderAsyncLoad(t *testing.T) {
	runFailover(t,
		load{kind: "async", label: "async HTTP calls (`Prefer: respond-async`, polled with `?wait=20s`)", calls: 120, run: asyncCall, again: asyncAgain},
		load{kind: "task", label: "MCP tasks (2026-07-28, polled with `tasks/get`)", calls: 120, run: mcpTaskCall, again: mcpTaskAgain},
	)
}
