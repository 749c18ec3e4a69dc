package host

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/worker/catalog"
	"github.com/toolpool/toolpool/internal/worker/mcpback"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/builtin"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// WorkspaceDefault is CatalogConfig.Builtin.Workspace: the root directory
// of the file tools, relative to the working directory.
const WorkspaceDefault = "workspace"

// CatalogConfig says which tools a Catalog holds: the demo tools, those of
// a catalog file and the built-in tools selected.
type CatalogConfig struct {
	// DemoTools adds the diagnostic tools echo, sleep and flaky.
	DemoTools bool
	// DemoAllowCrash lets flaky's "crash" failure end the whole process
	// (a worker process's: never one an orchestrator shares).
	DemoAllowCrash bool
	// Path is the catalog file (YAML or JSON, docs/tools.md): webhook,
	// exec, builtin and mcp entries. Empty: none.
	Path string
	// AllBuiltins selects every built-in tool (search_web only with
	// Builtin.SearchURL).
	AllBuiltins bool
	// Builtins selects built-in tools by name (read_file, write_file,
	// list_dir, http_request, search_web). A builtin
	// entry of the file is served whatever is selected, with the file's
	// settings laid over the built-in tool.
	Builtins []string
	// Builtin configures the built-in tools: their workspace (default
	// WorkspaceDefault), the search service, the private hosts
	// http_request may reach. They are made only when one is selected or
	// the file has a builtin entry.
	Builtin builtin.Config
	// Options adjust the reading of the file (environment, PATH, webhook
	// clients). Default: the process's.
	Options catalog.Options
}

// Catalog is a loaded catalog: the tools of its file and the built-in
// tools selected, checked and made, and the file's MCP servers, not yet
// started. Give it to one Host (Config.Catalog), which registers its
// tools, starts its MCP servers with it and closes it when it stops;
// Close a Catalog no Host took.
type Catalog struct {
	demo     []tools.Tool          // the demo tools, when asked for
	file     *catalog.File         // nil without a file
	builtins map[string]tools.Tool // the built-in tools made, by name
	extra    []string              // built-ins selected that the file does not mention, sorted

	mu     sync.Mutex
	closer io.Closer // the built-ins'; nil once closed
}

// LoadCatalog reads and checks the catalog cfg names and makes its tools:
// every error names the file, the line, the tool and the field. It starts
// no MCP server (a Host does) but opens the built-in tools' workspace,
// which Close releases.
func LoadCatalog(cfg CatalogConfig) (*Catalog, error) {
	c := &Catalog{}
	if cfg.DemoTools {
		scratch := tools.NewRegistry()
		if err := demo.RegisterWith(scratch, demo.Options{AllowCrash: cfg.DemoAllowCrash}); err != nil {
			return nil, err
		}
		for _, name := range scratch.Names() {
			rt, _ := scratch.Lookup(name)
			c.demo = append(c.demo, rt.Tool)
		}
	}
	if cfg.Path != "" {
		var err error
		if c.file, err = catalog.Load(cfg.Path, cfg.Options); err != nil {
			return nil, err
		}
	}
	mentioned := map[string]bool{}
	want := cfg.AllBuiltins || len(cfg.Builtins) > 0
	if c.file != nil {
		for _, e := range c.file.Entries {
			mentioned[e.Name] = true
			want = want || e.Backend == catalog.BackendBuiltin
		}
	}
	if err := c.makeBuiltins(want, cfg.Builtin); err != nil {
		return nil, err
	}
	for _, name := range cfg.Builtins {
		if _, ok := c.builtins[name]; !ok {
			_ = c.Close()
			if name == "search_web" {
				return nil, errors.New("the built-in tool search_web needs the URL of a search service")
			}
			return nil, fmt.Errorf("there is no built-in tool %s (built-in tools: %s)", name, strings.Join(slices.Sorted(maps.Keys(c.builtins)), ", "))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.builtins)) {
		if !mentioned[name] && (cfg.AllBuiltins || slices.Contains(cfg.Builtins, name)) {
			c.extra = append(c.extra, name)
		}
	}
	if c.file != nil {
		if _, err := c.file.Tools(c.builtins); err != nil { // the file's tools are made again when registered
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}

// makeBuiltins makes the built-in tools when want, on a registry of their
// own: the file may change their settings before they are registered.
func (c *Catalog) makeBuiltins(want bool, cfg builtin.Config) error {
	c.builtins = map[string]tools.Tool{}
	if !want {
		return nil
	}
	cfg.Workspace = cmp.Or(cfg.Workspace, WorkspaceDefault)
	scratch := tools.NewRegistry()
	closer, err := builtin.Register(scratch, cfg)
	if err != nil {
		return err
	}
	c.closer = closer
	for _, name := range scratch.Names() {
		rt, _ := scratch.Lookup(name)
		c.builtins[name] = rt.Tool
	}
	return nil
}

// Names are the tools the catalog registers (its MCP servers' aside),
// sorted.
func (c *Catalog) Names() []string {
	var names []string
	for _, t := range c.demo {
		names = append(names, t.Name)
	}
	if c.file != nil {
		for _, e := range c.file.Entries {
			if e.Backend != catalog.BackendMCP {
				names = append(names, e.Name)
			}
		}
	}
	names = append(names, c.extra...)
	slices.Sort(names)
	return names
}

// MCPServers are the names of the file's MCP servers, in file order.
func (c *Catalog) MCPServers() []string {
	if c.file == nil {
		return nil
	}
	var names []string
	for _, e := range c.file.MCPEntries() {
		names = append(names, e.Name)
	}
	return names
}

// Register adds the catalog's tools to reg: the demo tools, the file's (a
// builtin entry is the built-in tool with the file's settings laid over
// it), then the built-ins selected that the file does not mention. Its MCP
// servers' tools are registered when they start (Host.Start).
func (c *Catalog) Register(reg *tools.Registry) error {
	for _, t := range c.demo {
		if err := reg.Register(t); err != nil {
			return err
		}
	}
	if c.file != nil {
		if err := c.file.Apply(reg, c.builtins); err != nil {
			return err
		}
	}
	for _, name := range c.extra {
		if err := reg.Register(c.builtins[name]); err != nil {
			if errors.Is(err, tools.ErrDuplicateTool) {
				err = fmt.Errorf("the built-in tool %s clashes with another tool of that name (leave it out of the built-in tools, or rename the other)", name)
			}
			return err
		}
	}
	return nil
}

// startMCP starts the file's MCP servers and registers the tools of those
// that started in reg (catalog.File.StartMCP): a server that does not
// start is logged, left out and retried. Nil without MCP servers.
func (c *Catalog) startMCP(ctx context.Context, reg *tools.Registry, opts catalog.MCPOptions) (*mcpback.Set, error) {
	if len(c.MCPServers()) == 0 {
		return nil, nil
	}
	return c.file.StartMCP(ctx, reg, opts)
}

// Close releases the built-in tools. It is idempotent.
func (c *Catalog) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closer == nil {
		return nil
	}
	err := c.closer.Close()
	c.closer = nil
	return err
}

// mcpChecks are the readiness checks of the MCP servers, named
// "mcp:<server>" (mcpback.Backend.Check), made before the servers start:
// each asks the running set at the time of the probe.
func mcpChecks(servers []string, set func() *mcpback.Set) []health.Check {
	out := make([]health.Check, len(servers))
	for i, name := range servers {
		out[i] = health.Check{Name: "mcp:" + name, Func: func(ctx context.Context) error {
			s := set()
			if s == nil {
				return mcpback.ErrNotStarted
			}
			for _, c := range s.Checks() {
				if c.Name == "mcp:"+name {
					return c.Func(ctx)
				}
			}
			return mcpback.ErrNotStarted
		}}
	}
	return out
}
