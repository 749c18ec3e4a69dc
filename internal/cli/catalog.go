package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/pkg/catalog"
	"github.com/toolpool/toolpool/pkg/discovery"
	"github.com/toolpool/toolpool/pkg/health"
	"github.com/toolpool/toolpool/pkg/mcpback"
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

// mcpState is what RegisterTools started for the catalog's mcp entries,
// and what their servers serve.
type mcpState struct {
	set *mcpback.Set

	mu      sync.Mutex // serializes the changes handed on, in the order they came
	follow  Follower
	log     *slog.Logger
	served  map[string][]string     // server → the tools handed on last (or registered at start)
	pending map[string][]tools.Tool // server → its last change heard before follow was set
	owner   map[string]string       // pool tool name → the server it came from
	reg     *tools.Registry         // what RegisterTools registered in
}

// Follower is what follows the tools of the catalog's MCP servers:
// toolpool.Server.
type Follower interface {
	// Serve registers, serves and announces ts (or reannounces them).
	Serve(ctx context.Context, ts ...tools.Tool) error
	// Unserve withdraws the tools names and stops pulling their calls.
	Unserve(ctx context.Context, names ...string) error
}

// change hands on the tools server serves now, or keeps them until follow
// is set.
func (st *mcpState) change(server string, ts []tools.Tool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.follow == nil {
		st.pending[server] = ts
		return
	}
	st.hand(server, ts)
}

// hand makes follow serve ts and withdraw what server served before and
// ts lacks; st.mu is held. A tool whose name a tool of another entry has
// is left out (logged): that tool is not the server's to replace.
func (st *mcpState) hand(server string, ts []tools.Tool) {
	now := make([]string, 0, len(ts))
	mine := ts[:0:0]
	for _, t := range ts {
		owner, known := st.owner[t.Name]
		_, taken := st.reg.Lookup(t.Name)
		if known && owner != server || !known && taken {
			st.log.Error("an MCP server added a tool whose name another tool has; not serving it (set or change the entry's prefix)",
				"server", server, "tool", t.Name)
			continue
		}
		st.owner[t.Name] = server
		mine = append(mine, t)
		now = append(now, t.Name)
	}
	var removed []string
	for _, name := range st.served[server] {
		if !slices.Contains(now, name) {
			removed = append(removed, name)
		}
	}
	st.served[server] = now
	ctx, cancel := context.WithTimeout(context.Background(), discovery.PutTimeoutDefault+StartTimeoutFollow)
	defer cancel()
	if len(removed) > 0 {
		if err := st.follow.Unserve(ctx, removed...); err != nil {
			st.log.Warn("withdrawing the tools an MCP server removed failed", "server", server, "tools", removed, "err", err)
		}
	}
	if len(mine) > 0 {
		if err := st.follow.Serve(ctx, mine...); err != nil {
			st.log.Warn("serving an MCP server's changed tools failed", "server", server, "err", err)
		}
	}
}

// StartTimeoutFollow bounds the binding of the consumers of an MCP
// server's new tools, on top of discovery.PutTimeoutDefault for their
// announcements.
const StartTimeoutFollow = 30 * time.Second

// Checks are the readiness checks of the MCP servers RegisterTools
// started (none before).
func (c *CatalogFlags) Checks() []health.Check {
	if c.mcp == nil {
		return nil
	}
	return c.mcp.set.Checks()
}

// FollowMCP makes f follow the tools of the catalog's MCP servers from now
// on: when a server's tool list changes (list_changed) or a server that
// did not start comes up, f serves its tools (registering and announcing
// those it adds, reannouncing the others) and withdraws the ones it
// removed. Changes heard before are handed on at once. Errors are logged
// with log.
func (c *CatalogFlags) FollowMCP(f Follower, log *slog.Logger) {
	st := c.mcp
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.follow, st.log = f, cmp.Or(log, st.log)
	for _, server := range slices.Sorted(maps.Keys(st.pending)) {
		st.hand(server, st.pending[server])
	}
	clear(st.pending)
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
// does not start is logged and left out (Checks reports it). The returned
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
			st := &mcpState{
				log: cmp.Or(c.Logger, slog.Default()), reg: reg,
				served: map[string][]string{}, pending: map[string][]tools.Tool{}, owner: map[string]string{},
			}
			// A bound of its own per server (mcpback.StartTimeoutDefault): a
			// server that does not start is logged, left out and retried.
			st.mu.Lock() // a server's change waits until what it registered is known
			set, err := f.StartMCP(context.Background(), reg, catalog.MCPOptions{
				Logger: c.Logger, Metrics: c.MCPMetrics, OnChange: st.change,
			})
			if err != nil {
				st.mu.Unlock()
				return fail(err)
			}
			for _, b := range set.Backends() {
				for _, t := range b.Tools() {
					st.served[b.Name()] = append(st.served[b.Name()], t.Name)
					st.owner[t.Name] = b.Name()
				}
			}
			st.mu.Unlock()
			st.set, c.mcp = set, st
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
