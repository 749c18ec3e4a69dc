package cli

import (
	"io"

	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// Registry is the registry of the tools a binary's flags ask for: the demo
// tools when demoTools is set (with demo's options), then the catalog
// file's tools and the built-ins selected (CatalogFlags.RegisterTools).
// The returned Closer (never nil) releases the built-ins.
func Registry(demoTools bool, opts demo.Options, c *CatalogFlags, b *BuiltinFlags) (*tools.Registry, io.Closer, error) {
	reg := tools.NewRegistry()
	if demoTools {
		if err := demo.RegisterWith(reg, opts); err != nil {
			return nil, nopCloser{}, err
		}
	}
	if c == nil {
		return reg, nopCloser{}, nil
	}
	closer, err := c.RegisterTools(reg, b)
	if err != nil {
		return nil, nopCloser{}, err
	}
	return reg, closer, nil
}
