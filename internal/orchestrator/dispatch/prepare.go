package dispatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// prepare answers the calls that cannot run and registers the others in the
// call table; a call whose result is cached is answered from the cache.
func (t *turn) prepare() {
	d := t.d
	traceparent, ok := TraceparentFrom(t.ctx)
	if !ok {
		traceparent = NewTraceparent()
	}
	t.traceparent = traceparent
	var available []string // catalog names, listed once per turn if needed
	listed := false
	for i, c := range t.calls {
		if c.ID == "" {
			t.results[i] = missingIDResult(c.Name)
			d.rejected(c.Name, false, t.results[i].Code)
			continue
		}
		info, ok := d.cfg.Catalog.Lookup(t.ctx, c.Name)
		if !ok {
			if !listed {
				available, listed = d.cfg.Catalog.Names(t.ctx), true
			}
			if info.NoWorker {
				t.results[i] = noWorkerResult(c.ID, c.Name, available)
			} else {
				t.results[i] = unknownToolResult(c.ID, c.Name, available)
			}
			d.rejected(c.Name, info.NoWorker, t.results[i].Code)
			continue
		}
		input := bytes.TrimSpace(c.Input)
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		if len(input) > d.cfg.MaxInputBytes {
			t.results[i] = invalidInputResult(c.ID, c.Name,
				fmt.Sprintf("is %d bytes; the limit is %d bytes", len(input), d.cfg.MaxInputBytes))
			d.rejected(c.Name, true, t.results[i].Code)
			continue
		}
		msg := getCallMsg()
		key, err := msg.encode(&envelope.Call{
			ID:          c.ID,
			Tool:        c.Name,
			Input:       input,
			Tenant:      t.tenant,
			Session:     t.session,
			ReplyTo:     d.cfg.Instance,
			CreatedAt:   t.now,
			Deadline:    t.deadline,
			Traceparent: t.callTraceparent(i),
		})
		if err != nil {
			putCallMsg(msg)
			t.results[i] = encodeErrorResult(c.ID, c.Name, err)
			d.rejected(c.Name, true, t.results[i].Code)
			continue
		}
		if t.tr != nil {
			t.traceKey(i, key)
		}
		cached, ok, epoch := d.calls.registerEpoch(key, c.Name, waiter{ch: t.ch, idx: i, t: t}, t.now)
		if ok {
			putCallMsg(msg)
			t.results[i] = cachedResult(c.ID, c.Name, cached)
			if t.tr != nil {
				t.traceDedup(i, "cached")
			}
			continue
		}
		t.slots[i] = slot{state: slotWaiting, epoch: epoch, info: info, key: key, msg: msg}
		t.waiting++
	}
	if t.waiting > 0 {
		d.metrics.Pending(t.waiting)
	}
}

// encodeErrorResult answers a call the envelope refuses to encode.
func encodeErrorResult(id, tool string, err error) envelope.Result {
	var de *envelope.DecodeError
	if errors.As(err, &de) {
		if de.Field == "input" {
			return invalidInputResult(id, tool, de.Reason)
		}
		return errorResult(id, tool, envelope.ClassValidation, classify.CodeInvalidArgument,
			classify.RefusedFieldMessage(tool, de.Field, de.Reason))
	}
	return errorResult(id, tool, envelope.ClassInternal, classify.CodeInternal, classify.NotPreparedMessage(tool))
}

// cachedResult decodes a cached result: the turn gets a copy of its own.
// The cache keeps only results that decoded when they came, so an error
// here is a bug; the call is answered with an internal is_error.
func cachedResult(id, tool string, data []byte) envelope.Result {
	res, err := envelope.DecodeResult(data)
	if err != nil {
		return errorResult(id, tool, envelope.ClassInternal, classify.CodeInternal, classify.NotPreparedMessage(tool))
	}
	return *res
}
