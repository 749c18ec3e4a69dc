package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/pkg/client"
)

// The phases of the front doors (Config.Fronts): the pool, reached over
// HTTP instead of in the process.
const (
	PhasePoolHTTP   = "pool_http"    // the HTTP API, through pkg/client
	PhasePoolMCP    = "pool_mcp"     // MCP over streamable HTTP, the lean load generator's requests
	PhasePoolMCPSDK = "pool_mcp_sdk" // MCP over streamable HTTP, through the go-sdk client
)

// frontServer is the orchestrator's HTTP server (the HTTP API and /mcp)
// on a loopback port, as serve runs it, and an HTTP client for it that
// keeps a connection per agent.
type frontServer struct {
	p    *pool
	hs   *httpapi.Server
	base string // http://127.0.0.1:port
	hc   *http.Client
}

func startFrontServer(ctx context.Context, p *pool, cfg Config) (*frontServer, error) {
	hs, err := p.orch.NewHTTPServer(httpapi.ServerConfig{
		Addr: "127.0.0.1:0", Loopback: true,
		MaxConns: max(httpapi.MaxConnsDefault, 4*cfg.Concurrency), MaxRequests: max(httpapi.MaxRequestsDefault, 4*cfg.Concurrency),
	})
	if err != nil {
		return nil, err
	}
	if err := hs.Start(ctx); err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 0, 4*cfg.Concurrency
	tr.DialContext = (&net.Dialer{Timeout: 5 * time.Second}).DialContext
	return &frontServer{p: p, hs: hs, base: "http://" + hs.Addr(), hc: &http.Client{Transport: tr}}, nil
}

func (f *frontServer) stop() {
	f.p.orch.MCP().EndStreams()
	ctx, cancel := context.WithTimeout(context.Background(), frontStopTimeout)
	defer cancel()
	_ = f.hs.Stop(ctx)
	f.hc.CloseIdleConnections()
}

// httpTarget runs turns through the HTTP API.
type httpTarget struct {
	c      *client.Pool
	inputs callInputs
}

func (h *httpTarget) turn(ctx context.Context, a *agent, seq uint64, k int) {
	results, err := h.c.DispatchBlocks(ctx, a.session, h.inputs.blocks(a, seq, k))
	if err != nil {
		a.calls += uint64(k)
		a.fail(failClass(ctx), k)
		return
	}
	for i := range results {
		a.calls++
		if results[i].IsError {
			a.fail("is_error", 1)
		}
	}
}

// mcpTarget runs turns as MCP tools/call requests through the go-sdk
// client, one client session per agent (a host conversation each), the calls of a turn in parallel.
type mcpTarget struct {
	url    string
	hc     *http.Client
	inputs callInputs
	client *mcp.Client

	mu       sync.Mutex
	sessions map[int]*mcp.ClientSession
}

func newMCPTarget(f *frontServer, inputs callInputs) *mcpTarget {
	return &mcpTarget{
		url: f.base + "/mcp", hc: f.hc, inputs: inputs, sessions: map[int]*mcp.ClientSession{},
		client: mcp.NewClient(&mcp.Implementation{Name: "toolpool-bench"}, nil),
	}
}

// session is agent id's session, connected on its first turn (a warm-up
// turn, when there is a warm-up).
func (m *mcpTarget) session(ctx context.Context, id int) (*mcp.ClientSession, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cs := m.sessions[id]; cs != nil {
		return cs, nil
	}
	cs, err := m.client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: m.url, HTTPClient: m.hc}, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: mcp session: %w", err)
	}
	m.sessions[id] = cs
	return cs, nil
}

func (m *mcpTarget) turn(ctx context.Context, a *agent, seq uint64, k int) {
	cs, err := m.session(ctx, a.id)
	if err != nil {
		a.calls += uint64(k)
		a.fail(failClass(ctx), k)
		return
	}
	blocks := m.inputs.blocks(a, seq, k)
	one := func(i int) (isError bool, err error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: blocks[i].Name, Arguments: json.RawMessage(blocks[i].Input)})
		if err != nil {
			return false, err
		}
		return res.IsError, nil
	}
	outcomes := make([]error, k)
	isErr := make([]bool, k)
	if k == 1 {
		isErr[0], outcomes[0] = one(0)
	} else {
		var wg sync.WaitGroup
		for i := range k {
			wg.Go(func() { isErr[i], outcomes[i] = one(i) })
		}
		wg.Wait()
	}
	for i := range k {
		a.calls++
		switch {
		case outcomes[i] != nil:
			a.fail(failClass(ctx), 1)
		case isErr[i]:
			a.fail("is_error", 1)
		}
	}
}

func (m *mcpTarget) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, cs := range m.sessions {
		_ = cs.Close()
	}
	m.sessions = nil
}

// failClass names a turn that got no results.
func failClass(ctx context.Context) string {
	if ctx.Err() != nil {
		return "cancelled"
	}
	return "unavailable"
}

// startFront starts the front door's server and target on a started pool.
func startFront(ctx context.Context, front string, p *pool, cfg Config) (target, func(), error) {
	f, err := startFrontServer(ctx, p, cfg)
	if err != nil {
		return nil, nil, err
	}
	switch front {
	case FrontMCP:
		t := newLeanMCPTarget(f, p.target.inputs)
		return t, func() { t.stop(); f.stop() }, nil
	case FrontMCPSDK:
		t := newMCPTarget(f, p.target.inputs)
		return t, func() { t.stop(); f.stop() }, nil
	}
	c, err := client.New(f.base, client.WithHTTPClient(f.hc), client.WithTimeout(cfg.TurnTimeout), client.WithAPIKey(""))
	if err != nil {
		f.stop()
		return nil, nil, err
	}
	return &httpTarget{c: c, inputs: p.target.inputs}, f.stop, nil
}
