package builtin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/toolpool/toolpool/internal/infra/netguard"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/tools"
)

// search_web's settings.
const (
	// SearchTimeout is search_web's per-attempt timeout.
	SearchTimeout = 15 * time.Second
	// MaxResultsDefault is how many results search_web returns when the call
	// does not say (the schema's default).
	MaxResultsDefault = 10
	// LanguageDefault is the language of results when the call does not say
	// (the schema's default).
	LanguageDefault = "ru"
)

// Caps on what search_web reads and shows.
const (
	maxSearchResponse = 4 << 20
	maxTitleRunes     = 200
	maxSnippetRunes   = 400
	maxResultURLBytes = 1000
)

// ErrNoSearchURL is returned by NewSearchWeb when no search service is
// configured: search_web is offered only when there is one.
var ErrNoSearchURL = errors.New("builtin: search_web needs SearchConfig.URL, the search service's base URL")

// SearchConfig configures search_web.
type SearchConfig struct {
	// URL is the base URL of a SearXNG-compatible search service; the tool
	// requests GET {URL}/search?q=…&format=json&language=… (a URL whose path
	// already ends in /search is used as it is). Required.
	URL string
	// Guard decides which addresses the tool may connect to. The URL's own
	// host and port are allowed in addition: the operator configured them.
	// Default: a zero netguard.Guard.
	Guard *netguard.Guard
}

type searchTool struct {
	endpoint *url.URL
	client   *http.Client
}

// NewSearchWeb returns the search_web tool (schema tools.SearchWebSchema)
// and a Closer that closes its idle connections. Without cfg.URL it
// returns ErrNoSearchURL.
//
// Results are formatted for the model as a numbered list of title, URL and
// snippet, at most max_results of them; no results is a success that says
// so and suggests a broader query. A non-2xx answer of the search service
// is a *classify.HTTPError (429 and 5xx retried), without its body: the
// service is the operator's, and its error pages are not the model's
// business.
func NewSearchWeb(cfg SearchConfig) (tools.Tool, io.Closer, error) {
	if strings.TrimSpace(cfg.URL) == "" {
		return tools.Tool{}, nil, ErrNoSearchURL
	}
	u, err := parseHTTPURL(cfg.URL)
	if err != nil {
		return tools.Tool{}, nil, fmt.Errorf("builtin: SearchConfig.URL %q: want an absolute http or https URL", cfg.URL)
	}
	endpoint := *u
	endpoint.Fragment, endpoint.RawFragment = "", ""
	if !strings.HasSuffix(strings.TrimSuffix(endpoint.Path, "/"), "/search") {
		endpoint = *endpoint.JoinPath("search")
	}
	g := netguard.Guard{}
	if cfg.Guard != nil {
		g = *cfg.Guard
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	g.AllowHosts = append(slices.Clone(g.AllowHosts), net.JoinHostPort(u.Hostname(), port))
	s := &searchTool{endpoint: &endpoint, client: g.Client(0)}
	t := tools.Tool{
		Name: "search_web",
		Description: "Searches the web and returns a numbered list of results, each with title, URL and snippet. " +
			"Use it to find current information or sources; then read a page with http_request if you need more than the snippet. " +
			"query must not be empty; max_results is 1 to 50 (default 10); language is a code such as \"en\" or \"ru\" (default \"ru\").",
		InputSchema: tools.SearchWebSchema,
		Timeout:     SearchTimeout,
		Idempotent:  true,
		Hints:       searchWebHints,
		Handler:     s.search,
	}
	return t, closerFunc(s.client.CloseIdleConnections), nil
}

// searchResponse is the part of a SearXNG JSON answer the tool reads.
type searchResponse struct {
	Results []struct {
		Title   string `json:"title"`
		URL     string `json:"url"`
		Content string `json:"content"`
	} `json:"results"`
}

func (s *searchTool) search(ctx context.Context, input json.RawMessage) (tools.Output, error) {
	var in struct {
		Query      string `json:"query"`
		MaxResults int    `json:"max_results"`
		Language   string `json:"language"`
	}
	if err := decode(input, &in); err != nil {
		return tools.Output{}, err
	}
	query := strings.TrimSpace(in.Query)
	if query == "" {
		return tools.Output{}, classify.Invalid("query", "must not be empty or only whitespace")
	}
	limit := cmp.Or(in.MaxResults, MaxResultsDefault)
	if limit < 1 || limit > 50 {
		return tools.Output{}, classify.Invalid("max_results", "must be between 1 and 50")
	}
	u := *s.endpoint
	q := u.Query()
	q.Set("q", query)
	q.Set("format", "json")
	q.Set("language", cmp.Or(strings.TrimSpace(in.Language), LanguageDefault))
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return tools.Output{}, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", UserAgentDefault)
	setTraceparent(ctx, req)

	resp, err := s.client.Do(req)
	if err != nil {
		if _, ok := errors.AsType[*netguard.BlockedError](err); ok {
			// Only a redirect can lead elsewhere; do not name where.
			return tools.Output{}, classify.Permanent(classify.WithMessage(err,
				"the search service redirected the request to an address that is not allowed"))
		}
		return tools.Output{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
		return tools.Output{}, classify.NewHTTPError(resp)
	}
	var sr searchResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxSearchResponse)).Decode(&sr); err != nil {
		if ctx.Err() != nil {
			return tools.Output{}, ctx.Err()
		}
		return tools.Output{}, classify.Transient(classify.WithMessage(err,
			"the search service gave an answer that is not a valid list of results"))
	}
	return tools.Text(formatResults(query, sr, limit)), nil
}

// formatResults writes results as a numbered list.
func formatResults(query string, sr searchResponse, limit int) string {
	var b strings.Builder
	n := 0
	for _, r := range sr.Results {
		if n == limit {
			break
		}
		link := strings.TrimSpace(r.URL)
		if link == "" {
			continue
		}
		n++
		if len(link) > maxResultURLBytes {
			link = link[:runeCut([]byte(link[:maxResultURLBytes]))] + "…"
		}
		fmt.Fprintf(&b, "\n%d. %s\n   %s\n", n, cmp.Or(clip(r.Title, maxTitleRunes), "(no title)"), link)
		if snippet := clip(r.Content, maxSnippetRunes); snippet != "" {
			fmt.Fprintf(&b, "   %s\n", snippet)
		}
	}
	if n == 0 {
		return fmt.Sprintf("No results were found for %s. Try a broader query: fewer or more general keywords, "+
			"other words for the same thing, or another language.", quoteQuery(query))
	}
	word := "results"
	if n == 1 {
		word = "result"
	}
	return fmt.Sprintf("%d %s for %s:\n", n, word, quoteQuery(query)) + strings.TrimSuffix(b.String(), "\n")
}

// clip collapses whitespace and cuts s to n runes.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func quoteQuery(q string) string {
	return "\u201c" + clip(q, 200) + "\u201d"
}
