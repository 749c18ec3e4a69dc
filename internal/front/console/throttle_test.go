package console_test

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/front/console"
)

// clientFrom is a browser-like client whose connections come from the
// loopback address local (127.0.0.2 is another client than 127.0.0.1).
func clientFrom(t *testing.T, local string) *http.Client {
	c := client(t)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	c.Transport = tr
	return c
}

// A few wrong tokens from one address, then 429 with Retry-After for that
// address whatever the token (logged once); another address still logs in.
func TestLoginThrottled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var now atomic.Int64 // the time stands still: no try is earned back until the test says so
	now.Store(1_000_000)
	console.SetLoginClock(b.c, func() time.Time { return time.Unix(now.Load(), 0) })
	self := b.srv.URL
	guesser, operator := clientFrom(t, "127.0.0.1"), clientFrom(t, "127.0.0.2")
	wrong := url.Values{"token": {"not-a-token-0123456789"}}
	statuses := map[int]int{}
	var retryAfter string
	for range 50 {
		resp := b.post(t, guesser, "/ui/login", wrong, self)
		statuses[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests {
			retryAfter = resp.Header.Get("Retry-After")
		}
	}
	if statuses[http.StatusUnauthorized] != 5 || statuses[http.StatusTooManyRequests] != 45 {
		t.Errorf("50 wrong tokens from one address: %v, want 5 tries (401), then 429", statuses)
	}
	if retryAfter != "10" {
		t.Errorf("Retry-After %q, want 10 (seconds)", retryAfter)
	}
	// The right token from the throttled address waits too.
	if resp := b.post(t, guesser, "/ui/login", url.Values{"token": {aliceToken}}, self); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the right token from the throttled address: %d, want 429", resp.StatusCode)
	}
	// Another address is not locked out by the first one's failures.
	resp := b.post(t, operator, "/ui/login", url.Values{"token": {aliceToken}}, self)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Errorf("login from another address: %d, want 303 with a session", resp.StatusCode)
	}
	if n := strings.Count(b.log.String(), "console: logins throttled"); n != 1 {
		t.Errorf("throttling logged %d times, want once:\n%s", n, b.log.String())
	}
	// Ten seconds later the address has earned one try, and it is the
	// operator's: the right token gets in.
	now.Add(10)
	if resp := b.post(t, guesser, "/ui/login", url.Values{"token": {aliceToken}}, self); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the right token once a try is earned: %d, want 303", resp.StatusCode)
	}
}
