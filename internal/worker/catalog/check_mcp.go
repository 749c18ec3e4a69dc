package catalog

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/toolpool/toolpool/internal/worker/mcpback"
)

// mcpRules are the checks of an mcp entry: its mcp section names a server
// whose tools it serves, each with its own description and schema; the
// entry's other settings apply to every tool of the server.
var mcpRules = backendRules{
	section: func(s *toolSpec) bool { return s.MCP != nil },
	refuse: func(s *toolSpec) (string, string) {
		return mcpServerField(s), "each tool of the server keeps its own"
	},
	check: func(p *parser, e *Entry, s *toolSpec) (string, error) {
		m, field, err := p.checkMCP(s.MCP)
		if err != nil {
			if field == "" {
				return "mcp", err
			}
			return "mcp." + field, err
		}
		m.idempotent = s.Idempotent
		e.MCP = m
		return "", nil
	},
}

// mcpReservedHeaders are set by the streamable-HTTP client on its own.
var mcpReservedHeaders = []string{"Accept", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id"}

type mcpSpec struct {
	Command  []string          `yaml:"command"`
	Env      map[string]string `yaml:"env"`
	Dir      *string           `yaml:"dir"`
	URL      string            `yaml:"url"`
	Headers  map[string]string `yaml:"headers"`
	Tools    []string          `yaml:"tools"`
	Prefix   *string           `yaml:"prefix"`
	Sessions *int              `yaml:"sessions"`
}

// mcpServerField names a setting of s an mcp entry must not have (its
// tools' descriptions and schemas are the server's), or "".
func mcpServerField(s *toolSpec) string {
	switch {
	case s.Description != nil:
		return "description"
	case s.InputSchema.Kind != 0:
		return "input_schema"
	}
	return ""
}

// checkMCP checks an mcp section and names the faulty field by its path
// from the section ("" for the section as a whole).
func (p *parser) checkMCP(s *mcpSpec) (*MCPConfig, string, error) {
	m := &MCPConfig{Sessions: mcpback.SessionsDefault, resolved: http.Header{}}
	stdio, remote := len(s.Command) > 0, strings.TrimSpace(s.URL) != ""
	switch {
	case !stdio && !remote:
		return nil, "", errors.New("needs command (a stdio server the worker starts) or url (a streamable-HTTP server)")
	case stdio && remote:
		return nil, "url", errors.New("is not allowed with command: an entry is a stdio server or an HTTP server, not both")
	case stdio && (len(s.Headers) > 0):
		return nil, "headers", errors.New("is only for a server given by url")
	case remote && len(s.Env) > 0:
		return nil, "env", errors.New("is only for a server given by command")
	case remote && s.Dir != nil:
		return nil, "dir", errors.New("is only for a server given by command")
	}
	check := p.checkMCPRemote
	if stdio {
		check = p.checkMCPStdio
	}
	if field, err := check(m, s); err != nil {
		return nil, field, err
	}
	if field, err := checkMCPTools(s.Tools); err != nil {
		return nil, field, err
	}
	m.Tools = slices.Clone(s.Tools)
	if s.Prefix != nil {
		m.Prefix = *s.Prefix
		if m.Prefix != mcpback.PoolName("", m.Prefix) || len(m.Prefix) > 32 {
			return nil, "prefix", fmt.Errorf("must be at most 32 letters, digits, '_' or '-', got %q", m.Prefix)
		}
	}
	if s.Sessions != nil {
		if n := *s.Sessions; n < 1 || n > mcpback.SessionsMax {
			return nil, "sessions", fmt.Errorf("must be between 1 and %d, got %d", mcpback.SessionsMax, n)
		}
		m.Sessions = *s.Sessions
	}
	return m, "", nil
}

// checkMCPStdio checks the settings of a stdio server (command, env, dir)
// into m. The server gets the worker's PATH and HOME unless env sets them.
func (p *parser) checkMCPStdio(m *MCPConfig, s *mcpSpec) (string, error) {
	ex, field, err := p.checkExec(&execSpec{Command: s.Command, Dir: s.Dir})
	if err != nil {
		return field, err
	}
	m.Command, m.Dir = ex.Command, ex.Dir
	if len(s.Env) > 0 {
		m.Env = make(map[string]string, len(s.Env))
	}
	for _, name := range slices.Sorted(maps.Keys(s.Env)) {
		field := "env." + name
		if !envNameRE.MatchString(name) {
			return field, errors.New("is not an environment variable name")
		}
		value, secrets, err := expandEnv(s.Env[name], p.opts.LookupEnv)
		if err != nil {
			return field, err
		}
		if strings.ContainsRune(value, 0) {
			return field, errors.New("contains a NUL byte after its ${ENV} references are resolved")
		}
		m.Env[name] = s.Env[name]
		m.env = append(m.env, name+"="+value)
		m.secrets = append(m.secrets, secrets...)
	}
	for _, name := range []string{"PATH", "HOME"} {
		if _, given := s.Env[name]; given {
			continue
		}
		if v, ok := p.opts.LookupEnv(name); ok {
			m.env = append(m.env, name+"="+v)
		} else if name == "PATH" {
			m.env = append(m.env, "PATH="+PathDefault)
		}
	}
	return "", nil
}

// checkMCPRemote checks the settings of a streamable-HTTP server (url,
// headers) into m, as a webhook's, less the headers the MCP client sets.
func (p *parser) checkMCPRemote(m *MCPConfig, s *mcpSpec) (string, error) {
	for _, name := range slices.Sorted(maps.Keys(s.Headers)) {
		if slices.Contains(mcpReservedHeaders, http.CanonicalHeaderKey(name)) {
			return "headers." + name, errors.New("is set by the MCP client itself and cannot be configured")
		}
	}
	wh, field, err := p.checkWebhook(&webhookSpec{URL: s.URL, Headers: s.Headers})
	if err != nil {
		return field, err
	}
	if _, err := url.Parse(wh.URL); err != nil {
		return "url", errors.New("is not a valid URL")
	}
	m.URL, m.Headers, m.resolved, m.secrets = wh.URL, wh.Headers, wh.resolved, wh.secrets
	return "", nil
}

// checkMCPTools checks the list of the server's tools to serve: no name
// empty or listed twice.
func checkMCPTools(names []string) (string, error) {
	for i, name := range names {
		if strings.TrimSpace(name) == "" {
			return fmt.Sprintf("tools[%d]", i), errors.New("is empty; name a tool of the server")
		}
		if slices.Contains(names[:i], name) {
			return fmt.Sprintf("tools[%d]", i), fmt.Errorf("lists %q twice", name)
		}
	}
	return "", nil
}
