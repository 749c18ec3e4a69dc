package dispatch

import (
	"context"
	"fmt"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// Dispatch sends the calls of one assistant turn in parallel and returns their
// results in the calls' order.
//
// Every call gets a result: the tool's, or an is_error result the dispatcher
// writes itself for a call without an id, an unknown tool (nothing is
// published), an input that is not a JSON object or is too large, or a call
// with no result by the deadline (the ctx deadline, else DefaultTimeout).
// A call is identified by its key (envelope.CallKey): the tenant (see
// WithTenant), the session, the call id, the tool and the input. Calls are
// published with Nats-Msg-Id = key, so the same call dispatched twice runs
// once: a repeat waits for, or is answered from the cache with, the first
// one's result, and nothing else shares it (the same id with another input,
// session or tenant is another call). A call JetStream reports as a
// duplicate was published before, possibly by another orchestrator or by
// this one before a restart: its result is looked up in TOOL_RESULTS and
// awaited on tools.result.*.<key> (see watchDuplicate). When a tool has
// failed FailureThreshold times in a row in a session of a tenant, its
// is_error content tells the model to use a different approach; an empty
// session is not tracked.
//
// A call whose publish JetStream did not acknowledge (no responders while a
// stream leader is elected, a lost PubAck, a disconnect) is published again,
// same Nats-Msg-Id, with a jittered exponential backoff for up to
// Config.PublishRetryFor, so a short outage delays the turn instead of
// failing it.
//
// Dispatch returns an error, and no results, only when the turn cannot be
// handled as a whole: JetStream did not store a call (it refused it, or did
// not acknowledge it within PublishRetryFor or before the deadline), the
// dispatcher is not started or was stopped (errors wrapping ErrUnavailable),
// or ctx was cancelled. Calls published before such an error, other than
// a cancellation, still run; their results are kept a while, so
// dispatching the same calls again does not run them twice.
//
// A cancellation of ctx (not its deadline) before every call was answered
// cancels the calls left pool-wide (cancel.go): a call still queued is not
// run, a running one has its context cancelled on its worker with
// worker.ErrCancelled, and none is retried or dead-lettered; dispatching
// the same call again then runs it again. A cancellation whose cause is
// ErrDetached (a front door that stopped) leaves the calls in the pool
// instead. A ctx carrying a ProgressFunc
// (WithProgress) gets the progress its calls' tools report
// (tools.ReportProgress), with the calls' ids.
func (d *Dispatcher) Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) (_ []envelope.Result, err error) {
	if !d.turns.enter() {
		return nil, d.notRunningErr()
	}
	defer d.turns.leave()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	t := d.newTurn(ctx, session, calls)
	defer t.release()
	if d.cfg.Tracer.On() {
		t.startTrace() // calltrace.go
		defer t.endTrace(&err)
	}

	t.prepare()
	t.lookUpStored(false)             // after a restart of the NATS server: recovery.go
	if err = d.admit(t); err != nil { // admission control: admission.go
		return nil, err
	}
	defer d.unadmit(t)
	admittedHook(ctx)
	t.schedule() // fair shares: fair.go
	if err = t.publish(); err != nil {
		return nil, err
	}
	if err = t.wait(); err != nil {
		return nil, err
	}
	t.advise()
	return t.results, nil
}

// DispatchBlocks is Dispatch returning Anthropic tool_result blocks, in the
// calls' order.
func (d *Dispatcher) DispatchBlocks(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.ToolResultBlock, error) {
	results, err := d.Dispatch(ctx, session, calls)
	if err != nil {
		return nil, err
	}
	blocks := make([]envelope.ToolResultBlock, len(results))
	for i := range results {
		blocks[i] = results[i].ToolResult()
	}
	return blocks, nil
}
