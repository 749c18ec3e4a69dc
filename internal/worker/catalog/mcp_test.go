package catalog

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

const mcpCatalog = `tools:
  - name: everything
    backend: mcp
    timeout: 20s
    retry: {max_attempts: 2, base_delay: 100ms}
    concurrency: 7
    pause_on_rate_limit_above: 1m
    mcp:
      command: [npx, -y, server-everything]
      env:
        API_KEY: key-${TOKEN}
      tools: [echo, add]
      prefix: ev_
      sessions: 3
  - name: remote
    backend: mcp
    idempotent: false
    mcp:
      url: https://mcp.example.com/mcp
      headers:
        Authorization: Bearer ${TOKEN}
`

func TestMCPEntries(t *testing.T) {
	t.Parallel()
	f, err := Parse("tools.yaml", []byte(mcpCatalog), Options{
		LookupEnv: env("TOKEN", "tok-123", "PATH", "/opt/bin", "HOME", "/home/w"),
		LookPath:  func(file string) (string, error) { return "/opt/bin/" + file, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if ts, err := f.Tools(nil); err != nil || len(ts) != 0 {
		t.Fatalf("Tools of mcp entries: %v %v", ts, err)
	}
	es := f.MCPEntries()
	if len(es) != 2 {
		t.Fatalf("MCPEntries: %d", len(es))
	}
	cfg, err := es[0].MCPBackend()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "everything" || !slices.Equal(cfg.Command, []string{"/opt/bin/npx", "-y", "server-everything"}) ||
		!slices.Equal(cfg.Env, []string{"API_KEY=key-tok-123", "PATH=/opt/bin", "HOME=/home/w"}) ||
		!slices.Equal(cfg.Tools, []string{"echo", "add"}) || cfg.Prefix != "ev_" || cfg.Sessions != 3 ||
		cfg.Template.Timeout != 20*time.Second || cfg.Template.Retry.MaxAttempts != 2 || cfg.Template.Concurrency != 7 ||
		cfg.Template.PauseOn429Above != time.Minute || cfg.Idempotent != nil || !slices.Equal(cfg.Secrets, []string{"tok-123"}) {
		t.Errorf("stdio config: %+v", cfg)
	}
	if es[0].MCP.Env["API_KEY"] != "key-${TOKEN}" {
		t.Errorf("the printable env shows %q", es[0].MCP.Env["API_KEY"])
	}
	cfg, err = es[1].MCPBackend()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.URL != "https://mcp.example.com/mcp" || cfg.Header.Get("Authorization") != "Bearer tok-123" || cfg.Sessions != 1 ||
		cfg.Idempotent == nil || *cfg.Idempotent || es[1].MCP.Headers["Authorization"] != "Bearer ${TOKEN}" {
		t.Errorf("http config: %+v", cfg)
	}
}

func TestMCPErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, old, new, want string }{
		{"no server", "      command: [npx, -y, server-everything]\n", "",
			`tools.yaml:8: tool "everything": mcp: needs command (a stdio server the worker starts) or url (a streamable-HTTP server)`},
		{"both", "      url: https://mcp.example.com/mcp\n", "      url: https://mcp.example.com/mcp\n      command: [x]\n",
			`tools.yaml:19: tool "remote": mcp.url: is not allowed with command`},
		{"description", "    backend: mcp\n    timeout", "    backend: mcp\n    description: d\n    timeout",
			`tools.yaml:4: tool "everything": description: is not allowed with backend mcp`},
		{"input schema", "    backend: mcp\n    timeout", "    backend: mcp\n    input_schema: {type: object}\n    timeout",
			`tools.yaml:4: tool "everything": input_schema: is not allowed with backend mcp`},
		{"sessions", "sessions: 3", "sessions: 0",
			`tools.yaml:14: tool "everything": mcp.sessions: must be between 1 and 64, got 0`},
		{"prefix", "prefix: ev_", "prefix: ev.",
			`tools.yaml:13: tool "everything": mcp.prefix: must be at most 32 letters`},
		{"env unset", "key-${TOKEN}", "${NOPE}",
			`tools.yaml:11: tool "everything": mcp.env.API_KEY: refers to environment variable NOPE, which is not set`},
		{"headers with command", "      prefix: ev_\n", "      prefix: ev_\n      headers: {A: b}\n",
			`tools.yaml:14: tool "everything": mcp.headers: is only for a server given by url`},
		{"env with url", "      headers:\n", "      env: {A: b}\n      headers:\n",
			`tools.yaml:20: tool "remote": mcp.env: is only for a server given by command`},
		{"tools twice", "tools: [echo, add]", "tools: [echo, echo]",
			`tools.yaml:12: tool "everything": mcp.tools[1]: lists "echo" twice`},
		{"reserved header", "Authorization: Bearer ${TOKEN}", "mcp-session-id: x",
			`tools.yaml:21: tool "remote": mcp.headers.mcp-session-id: is set by the MCP client itself`},
		{"url scheme", "url: https://mcp.example.com/mcp", "url: ftp://mcp.example.com/mcp",
			`tools.yaml:19: tool "remote": mcp.url: must be an http or https URL`},
		{"unknown key", "      sessions: 3\n", "      sessions: 3\n      sesions: 3\n",
			`tools.yaml:15: tool "everything": mcp.sesions: unknown key (known keys: command, env, dir, url, headers, tools, prefix, sessions)`},
		{"settings missing", "    mcp:\n      url", "    webhook:\n      url",
			`tools.yaml:16: tool "remote": backend: is mcp, but the entry has no mcp settings`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := strings.Replace(mcpCatalog, tc.old, tc.new, 1)
			if src == mcpCatalog {
				t.Fatalf("replacing %q changed nothing", tc.old)
			}
			_, err := Parse("tools.yaml", []byte(src), Options{
				LookupEnv: env("TOKEN", "tok-123"),
				LookPath:  func(file string) (string, error) { return "/opt/bin/" + file, nil },
			})
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T: %v", err, err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error\n got %s\nwant %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "tok-123") {
				t.Errorf("error shows the secret: %s", err)
			}
		})
	}
}
