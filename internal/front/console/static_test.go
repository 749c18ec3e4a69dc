package console_test

import (
	"net/http"
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
