package cli

import (
	"flag"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"

	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/builtin"
)

// The selections of --builtin-tools besides a list of names.
const (
	BuiltinAll  = "all"  // every built-in tool
	BuiltinNone = "none" // no built-in tool (a catalog's builtin entries are still served)
)

// builtinNames are the built-in tools --builtin-tools may name.
var builtinNames = []string{"read_file", "write_file", "list_dir", "http_request", "search_web"}

// BuiltinFlags are the flags of the built-in tools (package builtin).
type BuiltinFlags struct {
	// Tools is --builtin-tools: which built-in tools to serve.
	Tools     BuiltinSelection
	Workspace string
	SearchURL string
	HTTPAllow string
}

// Register adds --builtin-tools (defaulting to def: BuiltinAll, BuiltinNone
// or a list of names), --workspace, --search-url and --http-allow to fs.
func (b *BuiltinFlags) Register(fs *flag.FlagSet, def string) {
	if err := b.Tools.Set(def); err != nil {
		panic("cli: bad --builtin-tools default: " + err.Error())
	}
	usage := "the built-in tools to serve: all, none, or a comma-separated `list` of names (" +
		strings.Join(builtinNames, ", ") + "; search_web needs --search-url)"
	if b.Tools.String() == BuiltinNone {
		usage += " (default none)" // the zero value, which flag does not print
	}
	fs.Var(&b.Tools, "builtin-tools", usage)
	fs.StringVar(&b.Workspace, "workspace", "workspace", "root directory of the file tools (created if missing); they cannot reach outside it")
	fs.StringVar(&b.SearchURL, "search-url", "", "base URL of a SearXNG-compatible search service; adds the search_web tool")
	fs.StringVar(&b.HTTPAllow, "http-allow", "", "comma-separated hosts (name, name:port, *.domain) and CIDRs that http_request may reach although they are private or loopback")
}

// BuiltinSelection is the value of --builtin-tools: all the built-in tools,
// none, or some of them by name. Its zero value selects none. True and
// false mean all and none (--builtin-tools=false, as when it was a boolean
// flag).
type BuiltinSelection struct {
	all   bool
	names []string // when not all; empty: none
}

// Set parses all, none (or true, false) or a comma-separated list of
// built-in tool names.
func (s *BuiltinSelection) Set(v string) error {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case BuiltinAll, "true", "1":
		*s = BuiltinSelection{all: true}
		return nil
	case BuiltinNone, "false", "0", "":
		*s = BuiltinSelection{}
		return nil
	}
	var names []string
	for item := range strings.SplitSeq(v, ",") {
		name := strings.TrimSpace(item)
		if name == "" {
			continue
		}
		if !slices.Contains(builtinNames, name) {
			return fmt.Errorf("%q is not a built-in tool; want all, none or some of %s", name, strings.Join(builtinNames, ","))
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	*s = BuiltinSelection{names: names}
	return nil
}

// String is the selection as Set reads it.
func (s *BuiltinSelection) String() string {
	switch {
	case s == nil || !s.all && len(s.names) == 0:
		return BuiltinNone
	case s.all:
		return BuiltinAll
	}
	return strings.Join(s.names, ",")
}

// None reports whether no built-in tool is selected.
func (s *BuiltinSelection) None() bool { return !s.all && len(s.names) == 0 }

// Includes reports whether the built-in tool name is selected.
func (s *BuiltinSelection) Includes(name string) bool {
	return s.all || slices.Contains(s.names, name)
}

// Names are the names selected one by one (none for all).
func (s *BuiltinSelection) Names() []string { return slices.Clone(s.names) }

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

// RegisterTools adds the built-in tools --builtin-tools selects to reg.
// The returned Closer (never nil) releases them.
func (b *BuiltinFlags) RegisterTools(reg *tools.Registry) (io.Closer, error) {
	return (&CatalogFlags{}).RegisterTools(reg, b)
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
