package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/tools/builtin"
)

type searchResult struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Content string `json:"content"`
}

// searxHandler is a fake SearXNG: /search?q=…&format=json answers by
// query. Queries starting with "status:" answer with that status;
// "flaky:" fails the first request of each query with 503.
func searxHandler(s *testServer, w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/search") {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	if q.Get("format") != "json" {
		http.Error(w, "format must be json", http.StatusBadRequest)
		return
	}
	query := q.Get("q")
	var results []searchResult
	switch {
	case query == "nothing":
	case query == "slow":
		<-r.Context().Done()
		return
	case query == "garbage":
		_, _ = io.WriteString(w, "<html>not json</html>")
		return
	case query == "redirect":
		http.Redirect(w, r, r.URL.Query().Get("language"), http.StatusFound) // the test passes the target as language
		return
	case strings.HasPrefix(query, "status:"):
		var code int
		fmt.Sscanf(strings.TrimPrefix(query, "status:"), "%d", &code)
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "7")
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "internal error page of search.internal.corp")
		return
	case strings.HasPrefix(query, "flaky:") && s.hit(r.URL.RequestURI()) == 1:
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	default:
		for i := 1; i <= 60; i++ {
			results = append(results, searchResult{
				Title:   fmt.Sprintf("Result %d for %s", i, query),
				URL:     fmt.Sprintf("https://example.com/%d", i),
				Content: fmt.Sprintf("Snippet\n\n  %d  in %s.", i, q.Get("language")),
			})
		}
		results = append(results[:1], append([]searchResult{{Title: "no url"}}, results[1:]...)...)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"query": query, "results": results})
}

func searchTool(t *testing.T, base string) *harness {
	t.Helper()
	tool, closer, err := builtin.NewSearchWeb(builtin.SearchConfig{URL: base}) // no allow-list: the URL's host is allowed by itself
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	return newHarness(t, tool)
}

func TestSearchWeb(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, searxHandler)
	h := searchTool(t, s.URL)

	got := h.mustCall("search_web", `{"query": "  go generics  ", "max_results": 3, "language": "en"}`)
	want := "3 results for \u201cgo generics\u201d:\n" +
		"\n1. Result 1 for go generics\n   https://example.com/1\n   Snippet 1 in en." +
		"\n\n2. Result 2 for go generics\n   https://example.com/2\n   Snippet 2 in en." +
		"\n\n3. Result 3 for go generics\n   https://example.com/3\n   Snippet 3 in en."
	if got != want {
		t.Errorf("search =\n%s\nwant\n%s", got, want)
	}
	req, _ := s.lastRequest()
	if q := req.URL.Query(); q.Get("q") != "go generics" || q.Get("format") != "json" || q.Get("language") != "en" {
		t.Errorf("search service got %s", req.URL.RawQuery)
	}

	got = h.mustCall("search_web", `{"query": "defaults"}`)
	if !strings.HasPrefix(got, "10 results for") || !strings.Contains(got, "\n10. ") || strings.Contains(got, "\n11. ") {
		t.Errorf("default max_results: %s", got)
	}
	if req, _ := s.lastRequest(); req.URL.Query().Get("language") != builtin.LanguageDefault {
		t.Errorf("default language: %s", req.URL.RawQuery)
	}
	if got := h.mustCall("search_web", `{"query": "many", "max_results": 50}`); !strings.HasPrefix(got, "50 results") {
		t.Errorf("max_results 50: %.80s", got)
	}

	got = h.mustCall("search_web", `{"query": "nothing"}`)
	if !strings.Contains(got, "No results were found for \u201cnothing\u201d") || !strings.Contains(got, "broader query") {
		t.Errorf("no results: %q", got)
	}
}

func TestSearchWebErrors(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, searxHandler)
	other := newTestServer(t, webHandler)
	h := searchTool(t, s.URL)

	for _, tc := range []struct {
		input string
		field string
	}{
		{`{"query": "   "}`, "query"},
		{`{"query": ""}`, "query"},
		{`{}`, "query"},
		{`{"query": "x", "max_results": 0}`, "max_results"},
		{`{"query": "x", "max_results": 51}`, "max_results"},
		{`{"query": "x", "maxResults": 5}`, "maxResults"},
	} {
		_, err := h.call("search_web", tc.input)
		wantErr(t, "search_web", err, validation, classify.CodeInvalidArgument, tc.field)
	}

	_, err := h.call("search_web", `{"query": "status:404"}`)
	wantErr(t, "search_web", err, permanent, "http_404")
	_, err = h.call("search_web", `{"query": "status:429"}`)
	if d := wantErr(t, "search_web", err, transient, classify.CodeHTTP429); d.RetryAfter != 7*time.Second {
		t.Errorf("429: retry after %v, want 7s", d.RetryAfter)
	}
	_, err = h.call("search_web", `{"query": "status:503"}`)
	d := wantErr(t, "search_web", err, transient, "http_503")
	msg := d.Message(classify.MessageInput{Tool: "search_web", Attempts: 3, Exhausted: true})
	if strings.Contains(msg, "search.internal") || strings.Contains(msg, "127.0.0.1") {
		t.Errorf("503 message shows the service's internals: %q", msg)
	}

	_, err = h.call("search_web", `{"query": "garbage"}`)
	wantErr(t, "search_web", err, transient, "", "not a valid list of results")

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = h.callCtx(ctx, "search_web", `{"query": "slow"}`)
	wantErr(t, "search_web", err, transient, classify.CodeTimeout)

	// A redirect to another loopback service is refused, without naming it.
	_, err = h.call("search_web", jsonInput(t, map[string]any{"query": "redirect", "language": other.URL + "/ok"}))
	d = wantErr(t, "search_web", err, permanent, "", "redirected the request to an address that is not allowed")
	if strings.Contains(d.Cause, "127.0.0.1") {
		t.Errorf("cause names the address: %q", d.Cause)
	}
	if n := other.conns.Load(); n != 0 {
		t.Errorf("the redirect target accepted %d connections", n)
	}
}

func TestSearchWebURL(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, searxHandler)
	for _, base := range []string{s.URL + "/searx", s.URL + "/searx/", s.URL + "/searx/search", s.URL + "/searx?key=k"} {
		h := searchTool(t, base)
		h.mustCall("search_web", `{"query": "path"}`)
		req, _ := s.lastRequest()
		if req.URL.Path != "/searx/search" {
			t.Errorf("base %s: requested %s", base, req.URL.Path)
		}
		if strings.Contains(base, "key=k") && req.URL.Query().Get("key") != "k" {
			t.Errorf("base %s: query %s lost the base's parameters", base, req.URL.RawQuery)
		}
	}
	if _, _, err := builtin.NewSearchWeb(builtin.SearchConfig{}); !errors.Is(err, builtin.ErrNoSearchURL) {
		t.Errorf("no URL: %v, want ErrNoSearchURL", err)
	}
	for _, bad := range []string{"search.example", "ftp://search.example", "http://"} {
		if _, _, err := builtin.NewSearchWeb(builtin.SearchConfig{URL: bad}); err == nil {
			t.Errorf("URL %q accepted", bad)
		}
	}
	tool, closer, err := builtin.NewSearchWeb(builtin.SearchConfig{URL: "https://search.example"})
	if err != nil {
		t.Fatal(err)
	}
	closer.Close()
	if tool.Timeout != builtin.SearchTimeout || !tool.Idempotent || tool.Name != "search_web" {
		t.Errorf("tool %s timeout %v idempotent %v", tool.Name, tool.Timeout, tool.Idempotent)
	}
}
