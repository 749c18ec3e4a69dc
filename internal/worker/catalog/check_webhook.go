package catalog

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// webhookRules are the checks of a webhook entry: it defines its tool, and
// its webhook section says where the calls are POSTed.
var webhookRules = backendRules{
	section: func(s *toolSpec) bool { return s.Webhook != nil },
	defines: true,
	check: func(p *parser, e *Entry, s *toolSpec) (string, error) {
		wh, field, err := p.checkWebhook(s.Webhook)
		if err != nil {
			return "webhook." + field, err
		}
		e.Webhook = wh
		return "", nil
	},
}

// headerNameRE is the grammar of an HTTP header's name.
var headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// reservedHeaders are set by the webhook backend itself.
var reservedHeaders = []string{
	"Host", "Content-Length", "Content-Type", "Transfer-Encoding", "Connection",
	http.CanonicalHeaderKey(envelope.HeaderTraceparent), HeaderCallID, HeaderAttempt, HeaderTool,
}

// checkWebhook checks a webhook section (or an mcp entry's url and
// headers) and names the faulty field by its path from the section.
func (p *parser) checkWebhook(s *webhookSpec) (*WebhookConfig, string, error) {
	wh := &WebhookConfig{URL: strings.TrimSpace(s.URL), MaxOutputBytes: MaxOutputBytesDefault, resolved: http.Header{}}
	if wh.URL == "" {
		return nil, "url", errors.New("is required: the URL that receives the POST")
	}
	u, err := url.Parse(wh.URL)
	switch {
	case err != nil:
		return nil, "url", errors.New("is not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, "url", fmt.Errorf("must be an http or https URL, not %q", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return nil, "url", errors.New("has no host")
	case u.User != nil:
		return nil, "url", errors.New("must not carry credentials; send them in a header whose value is ${ENV_NAME}")
	case u.Fragment != "":
		return nil, "url", errors.New("must not have a #fragment")
	}
	if len(s.Headers) > 0 {
		wh.Headers = make(map[string]string, len(s.Headers))
	}
	for _, name := range slices.Sorted(maps.Keys(s.Headers)) {
		tmpl := s.Headers[name]
		field := "headers." + name
		if !headerNameRE.MatchString(name) {
			return nil, field, errors.New("is not a valid header name")
		}
		canon := http.CanonicalHeaderKey(name)
		for _, r := range reservedHeaders {
			if canon == r {
				return nil, field, errors.New("is set by toolpool itself and cannot be configured")
			}
		}
		value, secrets, err := expandEnv(tmpl, p.opts.LookupEnv)
		if err != nil {
			return nil, field, err
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return nil, field, errors.New("contains a line break or NUL after its ${ENV} references are resolved")
		}
		wh.Headers[name] = tmpl
		wh.resolved.Add(canon, value)
		wh.secrets = append(wh.secrets, secrets...)
	}
	if s.MaxOutputBytes != nil {
		if n := *s.MaxOutputBytes; n < 1 || n > MaxOutputBytesMax {
			return nil, "max_output_bytes", fmt.Errorf("must be between 1 and %d, got %d", MaxOutputBytesMax, n)
		}
		wh.MaxOutputBytes = *s.MaxOutputBytes
	}
	return wh, "", nil
}
