package mcpfront

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// sessions records the pool session of each call.
type sessions struct {
	mu   sync.Mutex
	seen []string
}

func (d *sessions) Dispatch(_ context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	d.mu.Lock()
	d.seen = append(d.seen, session)
	d.mu.Unlock()
	out := make([]envelope.Result, len(calls))
	for i, c := range calls {
		out[i] = envelope.Result{CallID: c.ID, Content: envelope.Text("ran")}
	}
	return out, nil
}

func (d *sessions) all() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.seen)
}

// alternate sends each request to the next of its servers.
type alternate struct {
	hosts []string
	n     atomic.Int64
}

func (a *alternate) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Host = a.hosts[int(a.n.Add(1))%len(a.hosts)]
	r.Host = r.URL.Host
	return http.DefaultTransport.RoundTrip(r)
}

// serveReplicas serves n Servers of cfg (each with its own go-sdk
// server and session table) over HTTP; they share cfg.SessionKey.
func serveReplicas(t *testing.T, n int, cfg Config) ([]*Server, *alternate) {
	t.Helper()
	alt := &alternate{}
	var out []*Server
	for range n {
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(s.Handler())
		t.Cleanup(func() {
			s.EndStreams()
			hs.Close()
			_ = s.Stop(context.Background())
		})
		u, _ := url.Parse(hs.URL)
		alt.hosts = append(alt.hosts, u.Host)
		out = append(out, s)
	}
	return out, alt
}

// TestPoolSessionAcrossReplicas: the calls of one conversation get one
// pool session whichever replica serves them (round-robin), for a
// 2025-11-25 session (its id) and for 2026-07-28 (the client's identity);
// another conversation gets another.
func TestPoolSessionAcrossReplicas(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			d := &sessions{}
			_, alt := serveReplicas(t, 2, Config{Dispatcher: d, Tools: staticTools, SessionKey: key})
			conv := func(name string) {
				c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + alt.hosts[0], HTTPClient: &http.Client{Transport: alt}},
					&mcp.ClientSessionOptions{ProtocolVersion: version})
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				if got := cs.InitializeResult().ProtocolVersion; got != version {
					t.Fatalf("negotiated %s", got)
				}
				for range 4 {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
					if err != nil || res.IsError {
						t.Fatalf("call: %+v, %v", res, err)
					}
				}
			}
			conv("host-a")
			conv("host-b")
			seen := d.all()
			if len(seen) != 8 {
				t.Fatalf("%d calls: %v", len(seen), seen)
			}
			for i := 1; i < 4; i++ {
				if seen[i] != seen[0] || seen[4+i] != seen[4] {
					t.Errorf("a conversation's calls in several pool sessions: %v", seen)
				}
			}
			if seen[0] == seen[4] || seen[0] == "" {
				t.Errorf("two conversations in one pool session: %v", seen)
			}
		})
	}
}
