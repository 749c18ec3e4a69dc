package main

import (
	"flag"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/front/console"
	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/front/mcpfront"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
)

// httpFlags are serve's flags for its HTTP front door: API keys, what
// browsers and hosts may call it, its limits and its drain.
type httpFlags struct {
	keysFile       string
	keys           *apikey.Set // from keysFile and TOOLPOOL_API_KEYS
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
	uiTokensFile   string
	uiTokens       *console.Tokens // from uiTokensFile and TOOLPOOL_UI_TOKENS
	uiNoAuth       bool
	getenv         func(string) string // os.Getenv; tests replace it
}

// envMCPToken is the environment variable of the /mcp bearer token.
const envMCPToken = "TOOLPOOL_MCP_TOKEN"

func (h *httpFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&h.keysFile, "api-keys", "", "API key file (YAML or JSON; also "+apikey.Env+"): each key names a tenant and the tools it may call; required on a non-loopback --http")
	fs.BoolVar(&h.insecureNoAuth, "http-insecure-no-auth", false, "serve a non-loopback --http address without API keys: anyone who reaches it runs tools")
	fs.StringVar(&h.origins, "http-allowed-origins", "", "comma-separated browser origins (https://app.example.com) whose pages may call the HTTP API; others are refused")
	fs.StringVar(&h.hosts, "http-allowed-hosts", "", "comma-separated Host names the HTTP server answers to besides loopback ones (on a non-loopback address: only these, when given)")
	fs.DurationVar(&h.readTimeout, "http-read-timeout", httpapi.ReadTimeoutDefault, "how long a request body may take to arrive")
	fs.IntVar(&h.maxConns, "http-max-conns", httpapi.MaxConnsDefault, "HTTP connections open at once; more are closed at once")
	fs.IntVar(&h.maxRequests, "http-max-requests", httpapi.MaxRequestsDefault, "HTTP requests served at once (health probes not counted); more get 503 at once")
	fs.DurationVar(&h.drainTimeout, "http-drain-timeout", 30*time.Second, "on SIGTERM, how long HTTP requests in flight may finish before the pool stops")
	fs.IntVar(&h.maxInFlight, "max-calls-in-flight", dispatch.MaxCallsInFlightDefault, "tool calls this orchestrator waits for at once; past it turns get 429 at once (negative: unbounded)")
	fs.IntVar(&h.maxQueueDepth, "max-queue-depth", dispatch.MaxQueueDepthDefault, "calls waiting in one tool's queue past which turns calling it get 429 at once (negative: unbounded)")
	fs.StringVar(&h.mcpToken, "mcp-token", "", "bearer token /mcp requires (also "+envMCPToken+"); API keys are let in on /mcp too. On a non-loopback --http without API keys, /mcp is closed unless it is given")
	fs.BoolVar(&h.mcpNoAuth, "mcp-insecure-no-auth", false, "open /mcp on a non-loopback --http address without a token or API keys (closed there by default): anyone who reaches it runs tools")
	fs.StringVar(&h.uiTokensFile, "ui-tokens", "", "operator token file for the console at /ui (YAML: name: token; also "+console.EnvTokens+"=name=token,...); separate from API keys; required on a non-loopback --http")
	fs.BoolVar(&h.uiNoAuth, "ui-insecure-no-auth", false, "open the console at /ui on a non-loopback --http address without operator tokens: anyone who reaches it can replay, purge and pause")
	fs.BoolVar(&h.fairness, "fairness", true, "share a saturated tool's slots between tenants (fair shares, per-key limits, priorities: docs/operations.md); --fairness=false publishes calls in arrival order and applies no per-key limit")
	fs.BoolVar(&h.byQueueWait, "admit-by-queue-wait", true, "give 429 at once to turns calling a tool whose queue holds more work than the turn's timeout (estimated from the rate its workers drain it)")
}

// check validates the flags and loads the API keys; addr is --http.
func (h *httpFlags) check(addr string) error {
	getenv := h.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	keys, err := apikey.Load(h.keysFile, getenv)
	if err != nil {
		return cli.Usagef("%v", err)
	}
	h.keys = keys
	switch {
	case h.readTimeout <= 0:
		return cli.Usagef("--http-read-timeout must be positive")
	case h.maxConns < 1 || h.maxRequests < 1:
		return cli.Usagef("--http-max-conns and --http-max-requests must be at least 1")
	case h.drainTimeout < 0:
		return cli.Usagef("--http-drain-timeout must not be negative")
	case h.maxInFlight == 0 || h.maxQueueDepth == 0:
		return cli.Usagef("--max-calls-in-flight and --max-queue-depth must not be 0 (negative: unbounded)")
	}
	if addr != "" && !loopbackAddr(addr) && keys.Len() == 0 && !h.insecureNoAuth {
		return cli.Usagef("--http %s is not a loopback address: anyone who reaches it could run tools. "+
			"Give API keys (--api-keys FILE or %s), or pass --http-insecure-no-auth if something in front authenticates", addr, apikey.Env)
	}
	if h.uiTokens, err = console.LoadTokens(h.uiTokensFile, getenv); err != nil {
		return cli.Usagef("--ui-tokens: %v", err)
	}
	if addr != "" && !loopbackAddr(addr) && h.uiTokens.Len() == 0 && !h.uiNoAuth {
		return cli.Usagef("--http %s is not a loopback address and the console at /ui would be open to anyone who reaches it. "+
			"Give operator tokens (--ui-tokens FILE or %s), or pass --ui-insecure-no-auth if something in front authenticates", addr, console.EnvTokens)
	}
	if h.mcpToken == "" {
		h.mcpToken = getenv(envMCPToken)
	}
	if h.mcpToken != "" && len(h.mcpToken) < apikey.MinBytes {
		return cli.Usagef("--mcp-token (or %s) is %d characters; a bearer token needs at least %d (e.g. openssl rand -hex 32)", envMCPToken, len(h.mcpToken), apikey.MinBytes)
	}
	cfg := h.serverConfig(addr)
	cfg.Handler = http.NotFoundHandler()
	if _, err := httpapi.NewServer(cfg); err != nil {
		return cli.Usagef("%v", err)
	}
	return nil
}

// loopbackAddr reports whether a listen address is loopback only.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// serverConfig is the HTTP server's configuration from the flags; the
// orchestrator sets its handler, metrics and logger.
func (h *httpFlags) serverConfig(addr string) httpapi.ServerConfig {
	return httpapi.ServerConfig{
		Addr:           addr,
		Loopback:       loopbackAddr(addr),
		AllowedHosts:   splitList(h.hosts),
		AllowedOrigins: splitList(h.origins),
		Keys:           h.keys,
		ReadTimeout:    h.readTimeout,
		MaxConns:       h.maxConns,
		MaxRequests:    h.maxRequests,
	}
}

// mcpConfig is the MCP server's configuration from the flags: its keys
// are the API's (the Orchestrator's default). On a non-loopback addr
// with neither a token nor API keys (--http-insecure-no-auth), /mcp is
// not exposed unless --mcp-insecure-no-auth: it refuses every request,
// saying what to give.
func (h *httpFlags) mcpConfig(addr string) mcpfront.Config {
	c := mcpfront.Config{Token: h.mcpToken}
	if addr != "" && !loopbackAddr(addr) && h.keys.Len() == 0 && h.mcpToken == "" && !h.mcpNoAuth {
		c.Closed = "/mcp is not served on the non-loopback address " + addr + " without authentication: " +
			"start the orchestrator with --mcp-token TOKEN (or " + envMCPToken + ") or API keys, or with --mcp-insecure-no-auth if something in front authenticates"
	}
	return c
}

// consoleConfig is the console's configuration from the flags.
func (h *httpFlags) consoleConfig(addr string) *console.Config {
	return &console.Config{Tokens: h.uiTokens, Loopback: loopbackAddr(addr), InsecureNoAuth: h.uiNoAuth}
}

// apiConfig is the agent API's configuration from the flags.
func (h *httpFlags) apiConfig() httpapi.Config {
	return httpapi.Config{Keys: h.keys}
}
