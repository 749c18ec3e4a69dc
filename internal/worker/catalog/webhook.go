package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolpool/toolpool/internal/infra/netguard"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Request headers the webhook backend sets on every call.
const (
	// HeaderCallID carries the call's id (the model's tool_use id), the same
	// on every attempt: an endpoint can deduplicate by it.
	HeaderCallID = "Toolpool-Call-Id"
	// HeaderAttempt carries the attempt number, 1-based.
	HeaderAttempt = "Toolpool-Attempt"
	// HeaderTool carries the tool's name.
	HeaderTool = "Toolpool-Tool"
)

// drainMax bounds how much of a body past the output cap is read (and
// counted) before the connection is dropped.
const drainMax = 64 << 20

// redacted replaces a secret found in content.
const redacted = "[redacted]"

// minSecretLen is the shortest secret value redacted from content: shorter
// ones would mangle ordinary text.
const minSecretLen = 4

// defaultHTTPClient is the client of a webhook tool: dials go through a
// netguard.Guard that allows the webhook's own host (trusted configuration)
// and refuses every other private, loopback or link-local address; it
// follows no redirects (a 3xx is a permanent error), so headers carrying
// secrets never travel to another host.
func defaultHTTPClient(e *Entry) *http.Client {
	g := &netguard.Guard{}
	if u, err := url.Parse(e.Webhook.URL); err == nil {
		g.AllowHosts = []string{u.Host}
	}
	c := g.Client(clientTimeout(e))
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// clientTimeout backs the attempt's context up: the tool's timeout, plus a
// little so the context, which knows the cause, fires first.
func clientTimeout(e *Entry) time.Duration {
	return cmpOr(e.Timeout, tools.TimeoutDefault) + time.Second
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// webhook is the handler of a webhook tool.
type webhook struct {
	tool    string
	url     string
	headers http.Header
	secrets []string
	max     int
	client  *http.Client
}

func newWebhook(e *Entry, client *http.Client) *webhook {
	var secrets []string
	for _, s := range e.Webhook.secrets {
		if len(s) >= minSecretLen {
			secrets = append(secrets, s)
		}
	}
	return &webhook{
		tool:    e.Name,
		url:     e.Webhook.URL,
		headers: e.Webhook.resolved.Clone(),
		secrets: secrets,
		max:     e.Webhook.MaxOutputBytes,
		client:  client,
	}
}

// call POSTs the input and turns the answer into content or a classified
// error. No error or content it returns holds a header value.
func (w *webhook) call(ctx context.Context, input json.RawMessage) (tools.Output, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(input))
	if err != nil {
		return tools.Output{}, classify.Permanent(classify.WithMessage(errors.New("webhook: bad request"),
			"the tool's endpoint is misconfigured"))
	}
	req.Header = w.headers.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderTool, w.tool)
	if ci, ok := tools.CallInfoFrom(ctx); ok {
		if ci.Traceparent != "" {
			req.Header.Set(envelope.HeaderTraceparent, ci.Traceparent)
		}
		if ci.ID != "" {
			req.Header.Set(HeaderCallID, ci.ID)
		}
		if ci.Attempt > 0 {
			req.Header.Set(HeaderAttempt, strconv.Itoa(ci.Attempt))
		}
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return tools.Output{}, w.scrub(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10) // lets the connection be reused
		return tools.Output{}, classify.NewHTTPError(resp)
	}
	head, total, err := readCapped(resp.Body, w.max, drainMax)
	if err != nil && ctx.Err() == nil {
		return tools.Output{}, w.scrub(err)
	}
	if ctx.Err() != nil {
		return tools.Output{}, ctx.Err()
	}
	text := w.redact(strings.ToValidUTF8(string(head), "\uFFFD"))
	return tools.Text(envelope.TruncateHead(text, total, w.max)), nil
}

// redact replaces every secret header value in s.
func (w *webhook) redact(s string) string {
	for _, sec := range w.secrets {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, redacted)
		}
	}
	return s
}

// scrub makes sure an error's text holds no secret: it is returned as it is
// when it holds none (the usual case: transport errors name the URL, never
// headers), else wrapped so that its text is redacted while errors.Is/As
// still see the chain.
func (w *webhook) scrub(err error) error {
	msg := err.Error()
	if red := w.redact(msg); red != msg {
		return &redactedError{err: err, msg: red}
	}
	return err
}

type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// readCapped reads r to its end, keeping the first max bytes and counting
// the rest up to drain more bytes; total is the bytes read.
func readCapped(r io.Reader, max, drain int) (head []byte, total int, err error) {
	var buf bytes.Buffer
	n, err := io.CopyN(&buf, r, int64(max))
	total = int(n)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return buf.Bytes(), total, err
	}
	rest, err := io.CopyN(io.Discard, r, int64(drain))
	total += int(rest)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return buf.Bytes(), total, err
}
