package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// TraceIDPlaceholder is what Config.TraceURL's template has in place of a
// trace's id (32 lower-case hex digits).
const TraceIDPlaceholder = "{trace_id}"

// CheckTraceURL reports what is wrong with a trace URL template (see
// Config.TraceURL), naming it as field; nil for "" (no trace links).
func CheckTraceURL(field, tmpl string) error {
	if tmpl == "" {
		return nil
	}
	if !strings.Contains(tmpl, TraceIDPlaceholder) {
		return fmt.Errorf("%s %q has no %s: it is where a trace's id goes, e.g. http://127.0.0.1:16686/trace/%s", field, tmpl, TraceIDPlaceholder, TraceIDPlaceholder)
	}
	u, err := url.Parse(strings.ReplaceAll(tmpl, TraceIDPlaceholder, "0123456789abcdef0123456789abcdef"))
	if err != nil {
		return fmt.Errorf("%s %q is not a URL: %w", field, tmpl, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%s %q must be an http:// or https:// URL with a host", field, tmpl)
	}
	return nil
}

// traceLink is the trace URL of a traceparent, "" without a template or a
// valid traceparent.
func (c *Console) traceLink(traceparent string) string {
	if c.cfg.TraceURL == "" {
		return ""
	}
	sc, ok := tracing.ParseTraceparent(traceparent)
	if !ok {
		return ""
	}
	return strings.ReplaceAll(c.cfg.TraceURL, TraceIDPlaceholder, sc.TraceID().String())
}

// traceID is the trace id of a traceparent, "" when it is not valid.
func traceID(traceparent string) string {
	sc, ok := tracing.ParseTraceparent(traceparent)
	if !ok {
		return ""
	}
	return sc.TraceID().String()
}

// callView is a call's page: what the console knows of it, its result and
// its attempts.
type callView struct {
	Key       string
	Seen      resultRow // from the watcher: its tail row, or the call seen unanswered
	Answered  bool      // the watcher saw its result
	Result    *envelope.Result
	ResultErr string // why there is no stored result
	Words     string // what the model read, for an error
	Attempts  []settle.Attempt
	Started   *settle.Started // an attempt that began and has not reported
	AttErr    string          // why the attempts cannot be read
	TraceID   string
	TraceURL  string
	CallID    string
	Tool      string
}

func (c *Console) callPage(w http.ResponseWriter, r *http.Request, ss *session) {
	key := r.PathValue("key")
	if !envelope.ValidKey(key) {
		c.fail(w, ss, http.StatusNotFound, "That is not a call's key (32 characters of a-z and 2-7).")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	v := &callView{Key: key}
	v.Seen, v.Answered = c.watch.byKey(key)
	v.CallID, v.Tool = v.Seen.CallID, v.Seen.Tool
	c.readResult(ctx, v)
	c.readAttempts(ctx, v)
	v.TraceID, v.TraceURL = traceID(v.Seen.Trace), c.traceLink(v.Seen.Trace)
	c.render(w, "call", newView(ss, "Call "+key, "tail", v))
}

// readResult reads the call's stored result from TOOL_RESULTS.
func (c *Console) readResult(ctx context.Context, v *callView) {
	st, err := c.cfg.JetStream.Stream(ctx, jetstream.StreamResults)
	if err != nil {
		v.ResultErr = "TOOL_RESULTS cannot be read: " + err.Error()
		return
	}
	m, err := jetstream.LastResult(ctx, st, v.Key)
	if errors.Is(err, js.ErrMsgNotFound) {
		v.ResultErr = "TOOL_RESULTS holds no result of this call: it is still running, or its result is older than the stream keeps."
		return
	}
	if err != nil {
		v.ResultErr = "The result cannot be read: " + err.Error()
		return
	}
	res, err := envelope.DecodeResult(m.Data)
	if err != nil {
		v.ResultErr = "The stored result does not decode: " + err.Error()
		return
	}
	v.Result = res
	v.CallID, v.Tool = res.CallID, res.Tool
	if res.IsError {
		v.Words = shorten(res.Content.Text(), 4000)
	}
}

// readAttempts reads the call's failed attempts and start marker from the
// attempts bucket.
func (c *Console) readAttempts(ctx context.Context, v *callView) {
	h, err := c.history(ctx)
	if err != nil {
		v.AttErr = "The attempts cannot be read: " + err.Error()
		return
	}
	if v.Attempts, err = h.Load(ctx, v.Key); err != nil {
		v.AttErr = "The attempts cannot be read: " + err.Error()
		return
	}
	v.Started, _ = h.StartedOf(ctx, v.Key)
}

// history binds to the attempts bucket, once it succeeds.
func (c *Console) history(ctx context.Context) (*settle.History, error) {
	c.storeMu.Lock()
	defer c.storeMu.Unlock()
	if c.hist == nil {
		h, err := settle.OpenHistory(ctx, c.cfg.JetStream, c.cfg.Attempts)
		if err != nil {
			return nil, err
		}
		c.hist = h
	}
	return c.hist, nil
}
