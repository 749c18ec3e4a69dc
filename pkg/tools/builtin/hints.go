package builtin

import "github.com/toolpool/toolpool/pkg/tools"

// hints are a built-in tool's MCP annotations, every one of them given:
// what it does to the world is known here, so no host has to fall back on
// MCP's defaults (not read-only, destructive, open world).
func hints(readOnly, destructive, openWorld bool) tools.Hints {
	return tools.Hints{ReadOnly: &readOnly, Destructive: &destructive, OpenWorld: &openWorld}
}

// The built-in tools' hints: the workspace is a closed world; write_file
// overwrites ("write" replaces a file); http_request reaches any public
// server and may DELETE; search_web only reads the web.
var (
	readFileHints    = hints(true, false, false)
	listDirHints     = hints(true, false, false)
	writeFileHints   = hints(false, true, false)
	httpRequestHints = hints(false, true, true)
	searchWebHints   = hints(true, false, true)
)
