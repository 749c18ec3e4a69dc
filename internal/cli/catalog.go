package cli

import (
	"flag"
	"io"
	"time"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/worker/host"
	"github.com/toolpool/toolpool/pkg/tools"
)

// CatalogFlags are --tools (a tool catalog file) and --discovery-ttl (how
// long the live-tools announcements last). The catalog itself is the
// worker host's (host.LoadCatalog), the one toolpool.LoadCatalog loads
// too.
type CatalogFlags struct {
	// Path is --tools: the catalog file; empty for none.
	Path string
	// DiscoveryTTL is --discovery-ttl.
	DiscoveryTTL time.Duration
	// Replicas of the discovery bucket when it is created (not a flag: the
	// command sets it from its own --replicas). Default 1.
	Replicas int
}

// Register adds --tools and --discovery-ttl to fs.
func (c *CatalogFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.Path, "tools", "", "tool catalog file (YAML or JSON): webhook, exec, built-in and MCP-server tools; see docs/tools.md")
	fs.DurationVar(&c.DiscoveryTTL, "discovery-ttl", discovery.TTLDefault,
		"how long a worker's tool announcement lives without a refresh (fixed when the toolpool_tools bucket is created)")
}

// Bucket is the discovery bucket the flags ask for.
func (c *CatalogFlags) Bucket() discovery.BucketConfig {
	return discovery.BucketConfig{TTL: c.DiscoveryTTL, Replicas: c.Replicas}
}

// Config is the catalog the flags ask for: the file of --tools and the
// built-in tools b selects (--builtin-tools, with --workspace, --search-url
// and --http-allow). A built-in tool named that cannot be served is a
// usage error naming the flag.
func (c *CatalogFlags) Config(b *BuiltinFlags) (host.CatalogConfig, error) {
	bc, err := b.Config()
	if err != nil {
		return host.CatalogConfig{}, err
	}
	for _, name := range b.Tools.Names() {
		if name == "search_web" && bc.SearchURL == "" {
			return host.CatalogConfig{}, Usagef("--builtin-tools names %s, which needs --search-url", name)
		}
	}
	return host.CatalogConfig{
		Path:        c.Path,
		AllBuiltins: !b.Tools.None() && len(b.Tools.Names()) == 0,
		Builtins:    b.Tools.Names(),
		Builtin:     bc,
	}, nil
}

// Load loads the catalog the flags ask for (Config): the file checked, its
// tools and the built-in tools made, its MCP servers not yet started (the
// host that takes it starts them). A bad catalog is an error naming the
// file, the tool and the field.
func (c *CatalogFlags) Load(b *BuiltinFlags) (*host.Catalog, error) {
	cfg, err := c.Config(b)
	if err != nil {
		return nil, err
	}
	return host.LoadCatalog(cfg)
}

// RegisterTools adds to reg the tools of the catalog the flags ask for
// (Load): the file's webhook, exec and builtin entries and the built-in
// tools b selects. The file's MCP servers are left to the host that
// serves a catalog (host.Config.Catalog). The returned Closer (never nil)
// releases the built-ins.
func (c *CatalogFlags) RegisterTools(reg *tools.Registry, b *BuiltinFlags) (io.Closer, error) {
	cat, err := c.Load(b)
	if err != nil {
		return nopCloser{}, err
	}
	if err := cat.Register(reg); err != nil {
		_ = cat.Close()
		return nopCloser{}, err
	}
	return cat, nil
}
