package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/worker/catalog"
	"github.com/toolpool/toolpool/internal/worker/mcpback"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/builtin"
)

// CatalogFlags are --tools (a tool catalog file) and --discovery-ttl (how
// long the live-tools announcements last).
type CatalogFlags struct {
	Path         string
	DiscoveryTTL time.Duration
	// Replicas of the discovery bucket when it is created (not a flag: the
	// command sets it from its own --replicas). Default 1.
	Replicas int
	// Logger and MCPMetrics serve the catalog's MCP servers (not flags: the
	// command sets them before RegisterTools). Defaults slog.Default(), none.
	Logger     *slog.Logger
	MCPMetrics mcpback.Metrics

	mcp *mcpState // the MCP servers RegisterTools started
}

// mcpState is what RegisterTools started for the catalog's mcp entries.
type mcpState struct {
	set *mcpback.Set
}

// Checks are the readiness checks of the MCP servers RegisterTools
// started (none before).
func (c *CatalogFlags) Checks() []health.Check {
	if c.mcp == nil {
		return nil
	}
	return c.mcp.set.Checks()
}

// FollowMCP makes f (toolpool.Server) follow the tools of the catalog's
// MCP servers from now on (mcpback.Set.Follow): when a server's tool list
// changes or a server that did not start comes up, f serves, announces and
// withdraws its tools. Errors are logged with log.
func (c *CatalogFlags) FollowMCP(f mcpback.Follower, log *slog.Logger) {
	if c.mcp != nil {
		c.mcp.set.Follow(f, log)
	}
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

// RegisterTools adds to reg the tools of the catalog file at c.Path (none
// when it is empty) and the built-in tools b selects (--builtin-tools). A
// builtin entry of the catalog is the built-in tool of that name with the
// catalog's settings laid over it, and is served whatever b selects; the
// built-ins b selects that the catalog does not mention are added as they
// are. The catalog's mcp entries start their servers (c.Logger and
// c.MCPMetrics serve them), whose tools are registered too; a server that
// does not start is logged, left out and retried (Checks reports it;
// FollowMCP serves its tools once it is up). The returned
// Closer (never nil) releases the built-ins and stops the MCP servers. A
// bad catalog is an error naming the file, the tool and the field.
func (c *CatalogFlags) RegisterTools(reg *tools.Registry, b *BuiltinFlags) (io.Closer, error) {
	var f *catalog.File
	if c.Path != "" {
		var err error
		if f, err = catalog.Load(c.Path, catalog.Options{}); err != nil {
			return nopCloser{}, err
		}
	}
	mentioned := map[string]bool{}
	wantBuiltins := !b.Tools.None()
	if f != nil {
		for _, e := range f.Entries {
			mentioned[e.Name] = true
			wantBuiltins = wantBuiltins || e.Backend == catalog.BackendBuiltin
		}
	}
	builtins := map[string]tools.Tool{}
	var closer io.Closer = nopCloser{}
	if wantBuiltins {
		cfg, err := b.Config()
		if err != nil {
			return nopCloser{}, err
		}
		// Built on a registry of their own, so the catalog can change their
		// settings before they are registered in reg.
		scratch := tools.NewRegistry()
		if closer, err = builtin.Register(scratch, cfg); err != nil {
			return nopCloser{}, err
		}
		for _, name := range scratch.Names() {
			rt, _ := scratch.Lookup(name)
			builtins[name] = rt.Tool
		}
	}
	fail := func(err error) (io.Closer, error) {
		_ = closer.Close()
		return nopCloser{}, err
	}
	if f != nil {
		if err := f.Apply(reg, builtins); err != nil {
			return fail(err)
		}
		if len(f.MCPEntries()) > 0 {
			// A bound of its own per server (mcpback.StartTimeoutDefault): a
			// server that does not start is logged, left out and retried.
			set, err := f.StartMCP(context.Background(), reg, catalog.MCPOptions{Logger: c.Logger, Metrics: c.MCPMetrics})
			if err != nil {
				return fail(err)
			}
			c.mcp = &mcpState{set: set}
			closer = closers{set, closer}
		}
	}
	for _, name := range b.Tools.Names() {
		if _, ok := builtins[name]; !ok {
			return fail(Usagef("--builtin-tools names %s, which needs --search-url", name))
		}
	}
	if !b.Tools.None() {
		for _, name := range slices.Sorted(maps.Keys(builtins)) {
			if mentioned[name] || !b.Tools.Includes(name) {
				continue
			}
			if err := reg.Register(builtins[name]); err != nil {
				if errors.Is(err, tools.ErrDuplicateTool) {
					err = fmt.Errorf("the built-in tool %s clashes with another tool of that name (leave it out of --builtin-tools, or rename the other)", name)
				}
				return fail(err)
			}
		}
	}
	return closer, nil
}

// Announce starts announcing the tools of reg served by workerID in the
// discovery bucket; Stop the returned announcer before the worker stops.
func (c *CatalogFlags) Announce(ctx context.Context, j js.JetStream, reg *tools.Registry, workerID string, log *slog.Logger) (*discovery.Announcer, error) {
	a, err := discovery.NewAnnouncer(discovery.AnnouncerConfig{
		JetStream: j, Registry: reg, WorkerID: workerID, Bucket: c.Bucket(), Logger: log,
	})
	if err != nil {
		return nil, err
	}
	if err := a.Start(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// closers closes each of its closers, in order.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
