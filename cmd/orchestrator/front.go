package main

import (
	"flag"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/cli"
)

// httpFlags are serve's flags for its HTTP front door: API keys, what
// browsers and hosts may call it, its limits and its drain.
type httpFlags struct {
	keysFile       string
	keys           []toolpool.APIKey // from keysFile and TOOLPOOL_API_KEYS
	insecureNoAuth bool
	origins        string
	hosts          string
	readTimeout    time.Duration
	maxConns       int
	maxRequests    int
	drainTimeout   time.Duration
	maxInFlight    int
	maxQueueDepth  int
	byQueueWait    bool
	fairness       bool
	mcpToken       string // --mcp-token, or TOOLPOOL_MCP_TOKEN
	mcpNoAuth      bool
	mcpAskHosts    bool
	mcpMaxSessions int
	mcpSessionIdle time.Duration
	uiTokensFile   string
	uiTokens       map[string]string // from uiTokensFile and TOOLPOOL_UI_TOKENS
	uiNoAuth       bool
	traceURL       string              // --trace-url
	getenv         func(string) string // os.Getenv; tests replace it
}

// envMCPToken is the environment variable of the /mcp bearer token.
const envMCPToken = "TOOLPOOL_MCP_TOKEN"

func (h *httpFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&h.keysFile, "api-keys", "", "API key file (YAML or JSON; also "+toolpool.EnvAPIKeys+"): each key names a tenant and the tools it may call; required on a non-loopback --http")
	fs.BoolVar(&h.insecureNoAuth, "http-insecure-no-auth", false, "serve a non-loopback --http address without API keys: anyone who reaches it runs tools")
	fs.StringVar(&h.origins, "http-allowed-origins", "", "comma-separated browser origins (https://app.example.com) whose pages may call the HTTP API; others are refused")
	fs.StringVar(&h.hosts, "http-allowed-hosts", "", "comma-separated Host names the HTTP server answers to besides loopback ones (on a non-loopback address: only these, when given)")
	fs.DurationVar(&h.readTimeout, "http-read-timeout", toolpool.HTTPReadTimeoutDefault, "how long a request body may take to arrive")
	fs.IntVar(&h.maxConns, "http-max-conns", 0, "HTTP connections open at once; more are closed at once, but for 16 kept for /healthz and /readyz (0: three quarters of the open-file limit, at most 4096)")
	fs.IntVar(&h.maxRequests, "http-max-requests", toolpool.HTTPMaxRequestsDefault, "HTTP requests served at once (health probes not counted); more get 503 at once")
	fs.DurationVar(&h.drainTimeout, "http-drain-timeout", 30*time.Second, "on SIGTERM, how long HTTP requests in flight may finish before the pool stops")
	fs.IntVar(&h.maxInFlight, "max-calls-in-flight", toolpool.MaxCallsInFlightDefault, "tool calls this orchestrator waits for at once; past it turns get 429 at once (negative: unbounded)")
	fs.IntVar(&h.maxQueueDepth, "max-queue-depth", toolpool.MaxQueueDepthDefault, "calls waiting in one tool's queue past which turns calling it get 429 at once (negative: unbounded)")
	fs.StringVar(&h.mcpToken, "mcp-token", "", "bearer token /mcp requires (also "+envMCPToken+"); API keys are let in on /mcp too. On a non-loopback --http without API keys, /mcp is closed unless it is given")
	fs.IntVar(&h.mcpMaxSessions, "mcp-max-sessions", toolpool.MCPMaxSessionsDefault, "/mcp sessions (MCP revisions before 2026-07-28) this process holds; a session opened past it still works, served without process state (no GET stream, no cancellation); negative: none held")
	fs.DurationVar(&h.mcpSessionIdle, "mcp-session-timeout", toolpool.MCPSessionTimeoutDefault, "how long an idle /mcp session is held; its client goes on, served without process state")
	fs.BoolVar(&h.mcpAskHosts, "mcp-ask-hosts", false, "let an MCP 2026-07-28 host that declares elicitation ask its user to approve a call that needs approval (default: only operators decide, on the console or with orchestrator approvals)")
	fs.BoolVar(&h.mcpNoAuth, "mcp-insecure-no-auth", false, "open /mcp on a non-loopback --http address without a token or API keys (closed there by default): anyone who reaches it runs tools")
	fs.StringVar(&h.uiTokensFile, "ui-tokens", "", "operator token file for the console at /ui (YAML: name: token; also "+toolpool.EnvOperatorTokens+"=name=token,...); separate from API keys; required on a non-loopback --http")
	fs.BoolVar(&h.uiNoAuth, "ui-insecure-no-auth", false, "open the console at /ui on a non-loopback --http address without operator tokens: anyone who reaches it can replay, purge and pause")
	fs.StringVar(&h.traceURL, "trace-url", "", "link the console's calls and dead letters to their trace: a URL with {trace_id} where the trace's id goes, e.g. http://127.0.0.1:16686/trace/{trace_id} (Jaeger)")
	fs.BoolVar(&h.fairness, "fairness", true, "share a saturated tool's slots between tenants (fair shares, per-key limits, priorities: docs/operations.md); --fairness=false publishes calls in arrival order and applies no per-key limit")
	fs.BoolVar(&h.byQueueWait, "admit-by-queue-wait", true, "give 429 at once to turns calling a tool whose queue holds more work than the turn's timeout (estimated from the rate its workers drain it)")
}

// check validates the flags and loads the API keys; addr is --http.
func (h *httpFlags) check(addr string) error {
	getenv := h.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	keys, err := toolpool.LoadAPIKeys(h.keysFile, getenv)
	if err != nil {
		return cli.Usagef("%v", err)
	}
	h.keys = keys
	switch {
	case h.readTimeout <= 0:
		return cli.Usagef("--http-read-timeout must be positive")
	case h.maxConns < 0 || h.maxRequests < 1:
		return cli.Usagef("--http-max-conns must not be negative (0: what fits the open-file limit) and --http-max-requests must be at least 1")
	case h.drainTimeout < 0:
		return cli.Usagef("--http-drain-timeout must not be negative")
	case h.maxInFlight == 0 || h.maxQueueDepth == 0:
		return cli.Usagef("--max-calls-in-flight and --max-queue-depth must not be 0 (negative: unbounded)")
	}
	if addr != "" && !loopbackAddr(addr) && len(keys) == 0 && !h.insecureNoAuth {
		return cli.Usagef("--http %s is not a loopback address: anyone who reaches it could run tools. "+
			"Give API keys (--api-keys FILE or %s), or pass --http-insecure-no-auth if something in front authenticates", addr, toolpool.EnvAPIKeys)
	}
	if h.uiTokens, err = toolpool.LoadOperatorTokens(h.uiTokensFile, getenv); err != nil {
		return cli.Usagef("--ui-tokens: %v", err)
	}
	if addr != "" && !loopbackAddr(addr) && len(h.uiTokens) == 0 && !h.uiNoAuth {
		return cli.Usagef("--http %s is not a loopback address and the console at /ui would be open to anyone who reaches it. "+
			"Give operator tokens (--ui-tokens FILE or %s), or pass --ui-insecure-no-auth if something in front authenticates", addr, toolpool.EnvOperatorTokens)
	}
	if err := checkTraceURL(h.traceURL); err != nil {
		return err
	}
	if h.mcpToken == "" {
		h.mcpToken = getenv(envMCPToken)
	}
	if h.mcpToken != "" && len(h.mcpToken) < toolpool.APIKeyMinBytes {
		return cli.Usagef("--mcp-token (or %s) is %d characters; a bearer token needs at least %d (e.g. openssl rand -hex 32)", envMCPToken, len(h.mcpToken), toolpool.APIKeyMinBytes)
	}
	if addr == "" {
		return nil
	}
	if err := h.serverConfig(addr).WithDefaults().Validate(); err != nil {
		return cli.Usagef("%v", err)
	}
	return nil
}

// loopbackAddr reports whether a listen address is loopback only, as the
// root's HTTP server decides it.
func loopbackAddr(addr string) bool { return toolpool.HTTPServerConfig{Addr: addr}.Loopback() }

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// serverConfig is the HTTP server's configuration from the flags.
func (h *httpFlags) serverConfig(addr string) toolpool.HTTPServerConfig {
	return toolpool.HTTPServerConfig{
		Addr:           addr,
		AllowedHosts:   splitList(h.hosts),
		AllowedOrigins: splitList(h.origins),
		ReadTimeout:    h.readTimeout,
		MaxConns:       h.maxConns,
		MaxRequests:    h.maxRequests,
		InsecureNoAuth: h.insecureNoAuth,
	}
}

// mcpSettings are /mcp's settings from the flags.
type mcpSettings struct {
	Token  string // --mcp-token
	Closed string // when not empty, /mcp refuses every request with this text
}

// mcpConfig is /mcp's settings from the flags: the API keys are let in
// too. On a non-loopback addr with neither a token nor API keys
// (--http-insecure-no-auth), /mcp is not exposed unless
// --mcp-insecure-no-auth: it refuses every request, saying what to give.
func (h *httpFlags) mcpConfig(addr string) mcpSettings {
	c := mcpSettings{Token: h.mcpToken}
	if addr != "" && !loopbackAddr(addr) && len(h.keys) == 0 && h.mcpToken == "" && !h.mcpNoAuth {
		c.Closed = "/mcp is not served on the non-loopback address " + addr + " without authentication: " +
			"start the orchestrator with --mcp-token TOKEN (or " + envMCPToken + ") or API keys, or with --mcp-insecure-no-auth if something in front authenticates"
	}
	return c
}

// apply sets the front doors' part of cfg from the flags: the API keys,
// /mcp's token, and the console at /ui when --http serves one.
func (h *httpFlags) apply(cfg *toolpool.OrchestratorConfig, addr string) {
	mc := h.mcpConfig(addr)
	cfg.APIKeys, cfg.MCPToken, cfg.MCPRefusal = h.keys, mc.Token, mc.Closed
	cfg.MCPMaxSessions, cfg.MCPSessionTimeout = h.mcpMaxSessions, h.mcpSessionIdle
	cfg.MCPAskHosts = h.mcpAskHosts
	if addr != "" {
		cfg.Console, cfg.ConsoleTokens = true, h.uiTokens
		cfg.ConsoleLoopback, cfg.ConsoleInsecureNoAuth = loopbackAddr(addr), h.uiNoAuth
		cfg.TraceURL = h.traceURL
	}
}

// checkTraceURL checks --trace-url as OrchestratorConfig.TraceURL is
// checked, naming the flag.
func checkTraceURL(tmpl string) error {
	if tmpl == "" {
		return nil
	}
	u, err := url.Parse(strings.ReplaceAll(tmpl, "{trace_id}", "0123456789abcdef0123456789abcdef"))
	switch {
	case !strings.Contains(tmpl, "{trace_id}"):
		return cli.Usagef("--trace-url %q has no {trace_id}: it is where a trace's id goes, e.g. http://127.0.0.1:16686/trace/{trace_id}", tmpl)
	case err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return cli.Usagef("--trace-url %q must be an http:// or https:// URL with a host", tmpl)
	}
	return nil
}
