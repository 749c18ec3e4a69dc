package toolpool

import (
	"net/netip"

	"github.com/toolpool/toolpool/internal/worker/host"
	"github.com/toolpool/toolpool/pkg/tools/builtin"
)

// The built-in tools CatalogConfig.Builtins may name.
const (
	BuiltinReadFile    = "read_file"    // reads a text file of the workspace
	BuiltinWriteFile   = "write_file"   // writes a file of the workspace
	BuiltinListDir     = "list_dir"     // lists a directory of the workspace
	BuiltinHTTPRequest = "http_request" // sends an HTTP request to a public address
	BuiltinSearchWeb   = "search_web"   // searches the web (needs CatalogConfig.SearchURL)
)

// WorkspaceDefault is CatalogConfig.Workspace: the root directory of the
// file tools, relative to the working directory.
const WorkspaceDefault = host.WorkspaceDefault

// CatalogConfig says what a Catalog holds: the demo tools, the tools of a
// catalog file (YAML or JSON, the format of `worker --tools FILE`,
// docs/tools.md) and the built-in tools selected. The zero value holds
// nothing.
type CatalogConfig struct {
	// DemoTools adds the diagnostic tools echo (answers its input), sleep
	// (waits, honouring cancellation) and flaky (fails as asked: for
	// trying retries and dead letters).
	DemoTools bool
	// File is the catalog file: webhook, exec, builtin and mcp entries,
	// each with its schema, timeout, retry policy and the rest, and what
	// the orchestrators apply before a call runs: cost, cache and approval
	// (docs/tools.md, "Cost, cache and approval"). Empty: none.
	File string
	// AllBuiltins selects every built-in tool (search_web only with
	// SearchURL).
	AllBuiltins bool
	// Builtins selects built-in tools by name (BuiltinReadFile, …). A
	// builtin entry of File is served whatever is selected, with the
	// file's settings laid over the built-in tool.
	Builtins []string
	// Workspace is the root directory of the file tools (read_file,
	// write_file, list_dir), created if missing; they cannot reach
	// outside it. Default WorkspaceDefault. The built-in tools are made
	// only when one is selected or File has a builtin entry.
	Workspace string
	// SearchURL is the base URL of a SearXNG-compatible search service:
	// search_web needs it. Default: no search_web.
	SearchURL string
	// HTTPAllowHosts are the hosts (name, name:port, *.domain) that
	// http_request may reach although they are private or loopback.
	HTTPAllowHosts []string
	// HTTPAllowCIDRs are the private or loopback networks http_request
	// may reach.
	HTTPAllowCIDRs []netip.Prefix
}

// Catalog is a loaded catalog: the tools of its file and the built-in
// tools selected, checked and made, and the file's MCP servers, to be
// started by the Server it is given to (ServerConfig.Catalog). A Server
// takes it whole: it registers its tools, starts its MCP servers with
// itself, follows their tools while they run, and closes the catalog
// when it stops. Close a Catalog no Server took.
type Catalog struct {
	c *host.Catalog
}

// LoadCatalog reads and checks the catalog cfg names and makes its tools:
// an error names the file, the line, the tool and the field. A program
// gets from it what `worker --tools FILE` serves, MCP servers included.
// It starts no MCP server (the Server does at Start) but opens the
// built-in tools' workspace, which Close releases.
func LoadCatalog(cfg CatalogConfig) (*Catalog, error) {
	c, err := host.LoadCatalog(host.CatalogConfig{
		DemoTools: cfg.DemoTools,
		Path:      cfg.File, AllBuiltins: cfg.AllBuiltins, Builtins: cfg.Builtins,
		Builtin: builtin.Config{
			Workspace: cfg.Workspace, SearchURL: cfg.SearchURL,
			AllowHosts: cfg.HTTPAllowHosts, AllowCIDRs: cfg.HTTPAllowCIDRs,
		},
	})
	if err != nil {
		return nil, err
	}
	return &Catalog{c: c}, nil
}

// Names are the tools the catalog serves from the start, sorted: the demo
// tools, those of its file (but its MCP servers') and the built-ins
// selected.
func (c *Catalog) Names() []string { return c.c.Names() }

// MCPServers are the names of the file's MCP servers, in file order:
// their tools are known once they start.
func (c *Catalog) MCPServers() []string { return c.c.MCPServers() }

// Close releases the built-in tools' workspace. A Server that took the
// catalog closes it when it stops. It is idempotent.
func (c *Catalog) Close() error { return c.c.Close() }

// empty reports whether the catalog serves nothing, now or later.
func (c *Catalog) empty() bool { return len(c.c.Names()) == 0 && len(c.c.MCPServers()) == 0 }
