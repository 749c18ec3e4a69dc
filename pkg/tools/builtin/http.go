package builtin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolpool/toolpool/internal/infra/netguard"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Defaults of HTTPConfig.
const (
	// MaxResponseBytesDefault caps what http_request returns.
	MaxResponseBytesDefault = 256 << 10
	// HTTPTimeout is http_request's per-attempt timeout.
	HTTPTimeout = 30 * time.Second
	// UserAgentDefault is the User-Agent of requests that do not set one.
	UserAgentDefault = "toolpool/1 (+https://github.com/toolpool/toolpool)"
)

// errorSnippetBytes is how much of an error response's body the model is
// shown.
const errorSnippetBytes = 512

// maxHeaderValue caps each response header value shown.
const maxHeaderValue = 1024

// noteReserve is the room kept for the truncation note when the body is
// cut, so the whole content stays within MaxResponseBytes.
const noteReserve = 256

// responseHeaders are the response headers http_request shows, in this
// order. Others (cookies above all) are left out.
var responseHeaders = []string{
	"Content-Type", "Content-Length", "Content-Range", "Content-Language", "Content-Disposition",
	"Location", "Retry-After", "Last-Modified", "ETag", "Link", "Allow", "WWW-Authenticate",
}

// managedHeaders are set by the HTTP client and may not come from the model.
var managedHeaders = []string{
	"Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Te", "Trailer",
	"Keep-Alive", "Proxy-Connection", "Proxy-Authorization",
}

var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// HTTPConfig configures http_request. Zero fields take the defaults.
type HTTPConfig struct {
	// Guard decides which addresses the tool may connect to. Default: a zero
	// netguard.Guard, which refuses loopback, private, link-local and other
	// non-public addresses.
	Guard *netguard.Guard
	// MaxResponseBytes caps the content the tool returns: status line,
	// headers and as much of the body as fits; the rest of the body is left
	// out with a note. Default MaxResponseBytesDefault.
	MaxResponseBytes int64
	// UserAgent is sent when the request has no User-Agent header. Default
	// UserAgentDefault.
	UserAgent string
}

type httpTool struct {
	cfg    HTTPConfig
	client *http.Client
}

// NewHTTPRequest returns the http_request tool and a Closer that closes its
// idle connections. Every connection, redirects included, goes through
// cfg.Guard; only http and https URLs are accepted and at most
// netguard.MaxRedirects redirects are followed. The call's W3C traceparent
// is sent as the traceparent header.
//
// A 2xx response is returned as status, selected headers and body. Any
// other status is an error (*classify.HTTPError): 429, 408 and 5xx are
// retried by the pool (honouring Retry-After), other statuses are
// permanent. Its message shows the model the start of the response body
// (at most 512 bytes): the body comes from the server the model chose to
// call, so it is fair to show, and it often says what was wrong.
func NewHTTPRequest(cfg HTTPConfig) (tools.Tool, io.Closer, error) {
	if cfg.MaxResponseBytes < 0 {
		return tools.Tool{}, nil, fmt.Errorf("builtin: HTTPConfig.MaxResponseBytes must not be negative, got %d", cfg.MaxResponseBytes)
	}
	cfg.MaxResponseBytes = cmp.Or(cfg.MaxResponseBytes, MaxResponseBytesDefault)
	cfg.UserAgent = cmp.Or(cfg.UserAgent, UserAgentDefault)
	if cfg.Guard == nil {
		cfg.Guard = &netguard.Guard{}
	}
	h := &httpTool{cfg: cfg, client: cfg.Guard.Client(0)} // bounded by the call's context
	t := tools.Tool{
		Name: "http_request",
		Description: "Sends an HTTP request to a public http:// or https:// URL and returns the status, " +
			"the main response headers and the body (cut after about " + sizeText(cfg.MaxResponseBytes) + ", with a note). " +
			"Redirects are followed (at most " + strconv.Itoa(netguard.MaxRedirects) + "). " +
			"Addresses on private, loopback or link-local networks are refused. " +
			"A status other than 2xx is returned as an error that shows the start of the response body. " +
			"Use GET to read a page or an API; POST, PUT, PATCH and DELETE change things on the server, " +
			"so only use them when the task asks for it.",
		InputSchema: HTTPRequestSchema,
		Timeout:     HTTPTimeout,
		Idempotent:  false, // POST, PATCH, …
		Hints:       httpRequestHints,
		Handler:     h.do,
	}
	return t, closerFunc(h.client.CloseIdleConnections), nil
}

func (h *httpTool) do(ctx context.Context, input json.RawMessage) (tools.Output, error) {
	var in struct {
		Method  string            `json:"method"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	if err := decode(input, &in); err != nil {
		return tools.Output{}, err
	}
	method := strings.ToUpper(cmp.Or(strings.TrimSpace(in.Method), http.MethodGet))
	if !slices.Contains(httpMethods, method) {
		return tools.Output{}, classify.Invalid("method", "must be one of "+strings.Join(httpMethods, ", "))
	}
	u, err := parseHTTPURL(in.URL)
	if err != nil {
		return tools.Output{}, classify.Invalid("url", "must be an absolute http or https URL, such as https://example.com/page")
	}
	var fields []classify.FieldError
	for _, name := range slices.Sorted(maps.Keys(in.Headers)) {
		if reason := checkHeader(name, in.Headers[name]); reason != "" {
			fields = append(fields, classify.FieldError{Path: headerPath(name), Reason: reason})
		}
	}
	if len(fields) > 0 {
		return tools.Output{}, &classify.ValidationError{Fields: fields}
	}
	var body io.Reader
	if in.Body != "" {
		body = strings.NewReader(in.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return tools.Output{}, classify.Invalid("url", "could not be used for a request")
	}
	for name, v := range in.Headers {
		req.Header.Set(name, v)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", h.cfg.UserAgent)
	}
	setTraceparent(ctx, req)

	resp, err := h.client.Do(req)
	if err != nil {
		return tools.Output{}, err // classified: guard refusals, DNS, refused, timeouts, TLS
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, h.cfg.MaxResponseBytes+1))
	if err != nil {
		return tools.Output{}, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return tools.Output{}, errorWithSnippet(resp, data)
	}
	return tools.Text(h.format(req, resp, data)), nil
}

// format writes a 2xx response for the model.
func (h *httpTool) format(req *http.Request, resp *http.Response, data []byte) string {
	var head strings.Builder
	fmt.Fprintf(&head, "HTTP %d %s\n", resp.StatusCode, http.StatusText(resp.StatusCode))
	if resp.Request != nil && resp.Request.URL != nil && resp.Request.URL.String() != req.URL.String() {
		fmt.Fprintf(&head, "Final URL (after redirects): %s\n", redactURL(resp.Request.URL))
	}
	for _, name := range responseHeaders {
		for _, v := range resp.Header.Values(name) {
			if len(v) > maxHeaderValue {
				v = v[:runeCut([]byte(v[:maxHeaderValue]))] + "…"
			}
			head.WriteString(name)
			head.WriteString(": ")
			head.WriteString(v)
			head.WriteByte('\n')
		}
	}
	if (resp.Request != nil && resp.Request.Method == http.MethodHead) || len(data) == 0 {
		head.WriteString("\n[The response has no body.]")
		return head.String()
	}
	cut := false
	budget := int(h.cfg.MaxResponseBytes) - head.Len() - 1
	if len(data) > budget {
		cut = true
		budget = max(budget-noteReserve, 0)
		data = data[:runeCut(data[:min(budget, len(data))])]
	}
	text, binary := bodyText(resp.Header.Get("Content-Type"), data)
	if binary {
		n := "of unknown length"
		if resp.ContentLength >= 0 {
			n = countText(resp.ContentLength) + " bytes"
		}
		fmt.Fprintf(&head, "\n[The body is binary data (%s, %s) and is not shown.]", cmp.Or(resp.Header.Get("Content-Type"), "no content type"), n)
		return head.String()
	}
	if cut {
		left := "the rest was left out (its length is unknown)"
		if resp.ContentLength > int64(len(data)) && !resp.Uncompressed {
			left = fmt.Sprintf("%s bytes of %s were left out", countText(resp.ContentLength-int64(len(data))), countText(resp.ContentLength))
		}
		fmt.Fprintf(&head, "[The body is cut: only its first %s bytes are shown below; %s. "+
			"Ask for less, for example with a Range header or a narrower query.]\n", countText(int64(len(data))), left)
	}
	head.WriteByte('\n')
	head.WriteString(text)
	return head.String()
}

// bodyText decodes a body for the model: UTF-8 as is, ISO-8859-1 when the
// content type says so. A body that is neither is binary.
func bodyText(contentType string, data []byte) (string, bool) {
	if _, params, err := mime.ParseMediaType(contentType); err == nil {
		switch strings.ToLower(params["charset"]) {
		case "iso-8859-1", "latin1", "latin-1", "us-ascii":
			return latin1(data), false
		}
	}
	if !utf8.Valid(data) {
		return "", true
	}
	return string(data), false
}

// errorWithSnippet is the error for a non-2xx response: a
// *classify.HTTPError (which decides class and Retry-After) with a message
// that adds the start of the body.
func errorWithSnippet(resp *http.Response, data []byte) error {
	he := classify.NewHTTPError(resp)
	snippet := snippetOf(resp.Header.Get("Content-Type"), data)
	if snippet == "" {
		return he
	}
	d := classify.Classify(he)
	return classify.WithMessage(he, d.Cause+"; the response body began with: "+strconv.Quote(snippet))
}

// snippetOf is the start of a body, whitespace collapsed, for a message.
func snippetOf(contentType string, data []byte) string {
	more := len(data) > errorSnippetBytes
	if more {
		data = data[:runeCut(data[:errorSnippetBytes])]
	}
	text, binary := bodyText(contentType, data)
	if binary {
		return ""
	}
	s := strings.Join(strings.Fields(text), " ")
	if more && s != "" {
		s += "…"
	}
	return s
}

// parseHTTPURL parses an absolute http or https URL.
func parseHTTPURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Hostname() == "" || u.Opaque != "" {
		return nil, errors.New("not an absolute http or https URL")
	}
	return u, nil
}

// checkHeader returns why a request header the model gave is refused, or "".
func checkHeader(name, value string) string {
	if !validHeaderName(name) {
		return "is not a valid header name"
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		return "must not contain line breaks or NUL characters"
	}
	if slices.Contains(managedHeaders, http.CanonicalHeaderKey(name)) {
		return "is set by the HTTP client and cannot be given"
	}
	return ""
}

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// headerPath names a header field the way the validator names paths.
func headerPath(name string) string {
	if validHeaderName(name) && !strings.ContainsAny(name, ".[]\"'") {
		return "headers." + name
	}
	return "headers[" + strconv.Quote(name) + "]"
}

// setTraceparent sends the call's W3C trace context.
func setTraceparent(ctx context.Context, req *http.Request) {
	if ci, ok := tools.CallInfoFrom(ctx); ok && ci.Traceparent != "" {
		req.Header.Set(envelope.HeaderTraceparent, ci.Traceparent)
	}
}

// redactURL writes u without its user info.
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// closerFunc is an io.Closer calling f.
type closerFunc func()

func (f closerFunc) Close() error {
	f()
	return nil
}
