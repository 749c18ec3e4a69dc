package rescache

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// TestExpiredWithoutServerTTL: on a server that keeps entries past their
// TTL, Get's own check drops them, by the Nats-TTL the entry was written
// with.
func TestExpiredWithoutServerTTL(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	s := &Store{cfg: Config{Now: func() time.Time { return now }}}
	msg := func(ttl string, age time.Duration) *js.RawStreamMsg {
		h := nats.Header{}
		if ttl != "" {
			h.Set(js.MsgTTLHeader, ttl)
		}
		return &js.RawStreamMsg{Header: h, Time: now.Add(-age)}
	}
	for _, tc := range []struct {
		ttl  string
		age  time.Duration
		want bool
	}{
		{"10s", 9 * time.Second, false},
		{"10s", 10 * time.Second, true},
		{"10m0s", time.Hour, true},
		{"60", 59 * time.Second, false}, // whole seconds, as the server also takes
		{"60", time.Minute, true},
		{"", 30 * 24 * time.Hour, false}, // not ours: the age limit applies
		{"never", time.Hour, false},
	} {
		if got := s.expired(msg(tc.ttl, tc.age)); got != tc.want {
			t.Errorf("expired(ttl %q, age %v) = %v; want %v", tc.ttl, tc.age, got, tc.want)
		}
	}
}
