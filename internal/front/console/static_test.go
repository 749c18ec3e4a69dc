package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The static files are served without a login, by name only: the folder
// and anything that is not one of its files is a 404, never a listing.
func TestStaticNoListing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	for _, path := range []string{"/ui/static/", "/ui/static", "/ui/static/.", "/ui/static/..%2f", "/ui/static//", "/ui/static/app.js/", "/ui/static/nothing.css", "/ui/static/%2e%2e/login.html"} {
		resp, body := b.get(t, c, path)
		if strings.Contains(body, "app.js") || strings.Contains(body, "style.css") {
			t.Errorf("GET %s lists the folder: %d\n%s", path, resp.StatusCode, body)
		}
		if resp.StatusCode == http.StatusOK {
			t.Errorf("GET %s: 200, want no page", path)
		}
	}
	for _, path := range []string{"/ui/static/", "/ui/static/nothing.css", "/ui/static/app.js/"} {
		if resp, _ := b.get(t, c, path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
	for _, path := range []string{"/ui/static/app.js", "/ui/static/style.css"} {
		resp, body := b.get(t, c, path)
		if resp.StatusCode != http.StatusOK || body == "" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s without a login: %d, %d bytes, nosniff %q", path, resp.StatusCode, len(body), resp.Header.Get("X-Content-Type-Options"))
		}
	}
}

// Pages answered with an error status carry the same headers as the
// others: the login's 401 and an unknown page's 404 have the CSP.
func TestErrorPagesHaveTheirHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	resp := b.post(t, c, "/ui/login", url.Values{"token": {"not-a-token-0123456789"}}, b.srv.URL)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("login with a wrong token: %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
	if resp := b.post(t, c, "/ui/login", url.Values{"token": {aliceToken}}, b.srv.URL); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	resp, _ = b.get(t, c, "/ui/no-such-page")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") ||
		resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("an unknown page: %d, CSP %q, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"), resp.Header.Get("Content-Type"))
	}
}
