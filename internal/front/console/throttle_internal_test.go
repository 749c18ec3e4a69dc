package console

import (
	"strconv"
	"testing"
	"time"
)

// The bucket: loginBurst tries, then one per loginEvery; a success forgets
// the failures; the first refusal is the one to log.
func TestLoginBucket(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	th := newLoginThrottle(func() time.Time { return now })
	for i := range loginBurst {
		if ok, _, _ := th.allow("a"); !ok {
			t.Fatalf("try %d refused", i+1)
		}
		th.fail("a")
	}
	ok, wait, first := th.allow("a")
	if ok || wait <= 0 || wait > loginEvery || !first {
		t.Fatalf("after %d failures: ok %v wait %v first %v; want refused for up to %v, first", loginBurst, ok, wait, first, loginEvery)
	}
	if _, _, first := th.allow("a"); first {
		t.Error("the second refusal is logged again")
	}
	if ok, _, _ := th.allow("b"); !ok {
		t.Error("another address is refused")
	}
	now = now.Add(loginEvery)
	if ok, _, _ := th.allow("a"); !ok {
		t.Error("no try after loginEvery")
	}
	th.fail("a")
	if ok, _, first := th.allow("a"); ok || !first {
		t.Errorf("after the earned try failed: ok %v first %v, want refused and logged again", ok, first)
	}
	th.succeed("a")
	if ok, _, _ := th.allow("a"); !ok {
		t.Error("refused after a success")
	}
}

// The table stays bounded: addresses whose buckets are full again are
// forgotten; when it is full of throttled addresses newcomers share one
// bucket.
func TestLoginThrottleBounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	th := newLoginThrottle(func() time.Time { return now })
	for i := range maxLoginAddrs + 500 {
		k := "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256)
		for range loginBurst {
			th.fail(k)
		}
	}
	if n := len(th.m); n > maxLoginAddrs {
		t.Fatalf("%d addresses kept, want at most %d", n, maxLoginAddrs)
	}
	// Newcomers beyond the table share the overflow bucket, which their
	// failures emptied.
	if ok, _, _ := th.allow("192.0.2.1"); ok {
		t.Error("a newcomer to a full table of throttled addresses has tries left over from the others")
	}
	// Once every bucket is full again, the entries expire.
	now = now.Add(loginBurst*loginEvery + loginSweepEvery)
	if ok, _, _ := th.allow("192.0.2.1"); !ok {
		t.Error("a newcomer is refused once everyone's tries are back")
	}
	if n := len(th.m); n != 0 {
		t.Errorf("%d addresses kept after they all expired", n)
	}
}

func TestClientKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7:5555":             "192.0.2.7",
		"[::ffff:192.0.2.7]:1":       "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::9]:80":  "2001:db8:1:2::/64",
		"not an address":             "not an address",
	} {
		if got := clientKey(in); got != want {
			t.Errorf("clientKey(%q) = %q, want %q", in, got, want)
		}
	}
}
