package console

import (
	"net/netip"
	"sync"
	"time"
)

// Login throttling: each client address may try loginBurst wrong tokens,
// then one more every loginEvery; past that a login is answered 429 with
// Retry-After, whatever the token, until the address has earned a try.
const (
	loginBurst = 5
	loginEvery = 10 * time.Second
	// maxLoginAddrs bounds the table of addresses. When it is full of
	// addresses still throttled, a new address shares one overflow bucket
	// with every other newcomer, so that a guesser with more addresses
	// than the table holds gets no more tries than loginBurst each
	// loginEvery between them.
	maxLoginAddrs = 10_000
	// loginSweepEvery is how often the table forgets the addresses that
	// have all their tries again.
	loginSweepEvery = time.Minute
)

// loginThrottle is a token bucket per client address over failed logins.
type loginThrottle struct {
	now func() time.Time

	mu        sync.Mutex
	m         map[string]*loginBucket
	overflow  loginBucket
	lastSweep time.Time
}

// loginBucket is one address's bucket: tries left at at, and whether its
// being throttled has been logged since it last had a try.
type loginBucket struct {
	tries  float64
	at     time.Time
	logged bool
}

func newLoginThrottle(now func() time.Time) *loginThrottle {
	return &loginThrottle{now: now, m: map[string]*loginBucket{}, overflow: loginBucket{tries: loginBurst, at: now()}}
}

// clientKey is the address a login is counted against: the peer's IP
// (a reverse proxy's, behind one), an IPv6 address by its /64.
func clientKey(remoteAddr string) string {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	a := ap.Addr().Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// refill brings b's tries up to now.
func (b *loginBucket) refill(now time.Time) {
	if elapsed := now.Sub(b.at); elapsed > 0 {
		b.tries = min(loginBurst, b.tries+elapsed.Seconds()/loginEvery.Seconds())
	}
	b.at = now
}

// allow reports whether key may try a token now. When it may not, wait is
// how long until it may, and first is true the first time since key last
// had a try (log it once).
func (t *loginThrottle) allow(key string) (ok bool, wait time.Duration, first bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	b := t.m[key]
	if b == nil {
		b = &t.overflow
		if t.room(now) {
			return true, 0, false // an address unknown to the table has every try
		}
	}
	b.refill(now)
	if b.tries >= 1 {
		b.logged = false
		return true, 0, false
	}
	wait = time.Duration((1 - b.tries) * float64(loginEvery))
	first = !b.logged
	b.logged = true
	return false, wait, first
}

// fail counts a wrong token against key.
func (t *loginThrottle) fail(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	b := t.m[key]
	if b == nil {
		if !t.room(now) {
			b = &t.overflow
		} else {
			b = &loginBucket{tries: loginBurst, at: now}
			t.m[key] = b
		}
	}
	b.refill(now)
	b.tries = max(0, b.tries-1)
}

// succeed forgets key's failures: an operator who got in is not made to
// wait for the typos before.
func (t *loginThrottle) succeed(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, key)
}

// room reports whether the table has room for one more address. It
// forgets the addresses whose buckets are full again (as good as absent):
// once a minute, or when the table is full (then at most once per
// loginEvery).
func (t *loginThrottle) room(now time.Time) bool {
	full := len(t.m) >= maxLoginAddrs
	since := now.Sub(t.lastSweep)
	if since >= loginSweepEvery || (full && since >= loginEvery) {
		t.lastSweep = now
		for k, b := range t.m {
			if b.refill(now); b.tries >= loginBurst {
				delete(t.m, k)
			}
		}
	}
	return len(t.m) < maxLoginAddrs
}
