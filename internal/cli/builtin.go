package cli

import (
	"flag"
	"io"
	"net/netip"
	"strings"

	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/builtin"
)

// BuiltinFlags are the flags of the built-in tools (package builtin).
type BuiltinFlags struct {
	Enabled   bool
	Workspace string
	SearchURL string
	HTTPAllow string
}

// Register adds --builtin-tools, --workspace, --search-url and --http-allow
// to fs.
func (b *BuiltinFlags) Register(fs *flag.FlagSet) {
	fs.BoolVar(&b.Enabled, "builtin-tools", true, "serve the built-in tools read_file, write_file, list_dir, http_request (and search_web with --search-url)")
	fs.StringVar(&b.Workspace, "workspace", "workspace", "root directory of the file tools (created if missing); they cannot reach outside it")
	fs.StringVar(&b.SearchURL, "search-url", "", "base URL of a SearXNG-compatible search service; adds the search_web tool")
	fs.StringVar(&b.HTTPAllow, "http-allow", "", "comma-separated hosts (name, name:port, *.domain) and CIDRs that http_request may reach although they are private or loopback")
}

// Config builds the builtin.Config the flags ask for.
func (b *BuiltinFlags) Config() (builtin.Config, error) {
	cfg := builtin.Config{Workspace: b.Workspace, SearchURL: b.SearchURL}
	for _, item := range strings.Split(b.HTTPAllow, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
		case strings.Contains(item, "/"):
			p, err := netip.ParsePrefix(item)
			if err != nil {
				return cfg, Usagef("--http-allow: %q is not a CIDR such as 10.0.0.0/8", item)
			}
			cfg.AllowCIDRs = append(cfg.AllowCIDRs, p.Masked())
		default:
			cfg.AllowHosts = append(cfg.AllowHosts, item)
		}
	}
	return cfg, nil
}

// RegisterTools adds the built-in tools to reg when --builtin-tools is on.
// The returned Closer (never nil) releases them.
func (b *BuiltinFlags) RegisterTools(reg *tools.Registry) (io.Closer, error) {
	if !b.Enabled {
		return nopCloser{}, nil
	}
	cfg, err := b.Config()
	if err != nil {
		return nopCloser{}, err
	}
	c, err := builtin.Register(reg, cfg)
	if err != nil {
		return nopCloser{}, err
	}
	return c, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
