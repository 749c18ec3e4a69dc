package builtin

import (
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/toolpool/toolpool/internal/infra/netguard"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Config configures the built-in tools that Register adds. Zero fields take
// the defaults of FileConfig, HTTPConfig and SearchConfig.
type Config struct {
	// Workspace is the root directory of read_file, write_file and list_dir;
	// created if missing. Required.
	Workspace string
	// MaxReadBytes caps read_file. Default MaxReadBytesDefault.
	MaxReadBytes int64
	// MaxWriteBytes caps write_file's content. Default MaxWriteBytesDefault.
	MaxWriteBytes int64
	// AllowHosts and AllowCIDRs let http_request (and search_web) reach
	// these hosts and networks although they are private, loopback or
	// otherwise not public (see netguard.Guard). Default: none.
	AllowHosts []string
	AllowCIDRs []netip.Prefix
	// MaxResponseBytes caps http_request's content. Default
	// MaxResponseBytesDefault.
	MaxResponseBytes int64
	// SearchURL is the base URL of a SearXNG-compatible search service.
	// Empty: search_web is not registered.
	SearchURL string
	// Resolver looks up host names for http_request and search_web. Default
	// net.DefaultResolver.
	Resolver netguard.Resolver
}

// Register adds the built-in tools to reg: read_file, write_file and
// list_dir on cfg.Workspace, http_request, and search_web when
// cfg.SearchURL is set. The returned Closer closes the workspace and the
// HTTP clients' idle connections; on error nothing stays open.
func Register(reg *tools.Registry, cfg Config) (io.Closer, error) {
	if reg == nil {
		return nil, errors.New("builtin: Register needs a registry")
	}
	if cfg.Workspace == "" {
		return nil, errors.New("builtin: Config.Workspace is required")
	}
	var closers multiCloser
	fail := func(err error) (io.Closer, error) {
		_ = closers.Close()
		return nil, err
	}
	files, fc, err := NewFileTools(FileConfig{Root: cfg.Workspace, MaxReadBytes: cfg.MaxReadBytes, MaxWriteBytes: cfg.MaxWriteBytes})
	if err != nil {
		return fail(err)
	}
	closers = append(closers, fc)
	all := files

	guard := &netguard.Guard{AllowHosts: cfg.AllowHosts, AllowCIDRs: cfg.AllowCIDRs, Resolver: cfg.Resolver}
	ht, hc, err := NewHTTPRequest(HTTPConfig{Guard: guard, MaxResponseBytes: cfg.MaxResponseBytes})
	if err != nil {
		return fail(err)
	}
	closers = append(closers, hc)
	all = append(all, ht)

	if cfg.SearchURL != "" {
		st, sc, err := NewSearchWeb(SearchConfig{URL: cfg.SearchURL, Guard: guard})
		if err != nil {
			return fail(err)
		}
		closers = append(closers, sc)
		all = append(all, st)
	}
	for _, t := range all { // a name already taken fails before anything is added
		if _, taken := reg.Lookup(t.Name); taken {
			return fail(fmt.Errorf("builtin: register %q: %w", t.Name, tools.ErrDuplicateTool))
		}
	}
	for _, t := range all {
		if err := reg.Register(t); err != nil {
			return fail(fmt.Errorf("builtin: %w", err))
		}
	}
	return closers, nil
}

// multiCloser closes each of its closers, returning the first error.
type multiCloser []io.Closer

func (m multiCloser) Close() error {
	var errs []error
	for _, c := range m {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
