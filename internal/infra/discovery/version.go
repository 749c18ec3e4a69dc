package discovery

import (
	"runtime/debug"
	"sync"
)

// BuildVersion is the version of the running binary as its build info
// tells it: the main module's version ("v1.2.3", or "(devel)" for a
// build from a checkout), then, when the build recorded them, the first
// 12 characters of the VCS revision and "+dirty" for a modified tree.
// Every announcement carries it (Announcement.Version), so an operator
// sees which build serves a tool during a rolling upgrade.
func BuildVersion() string { return buildVersion() }

var buildVersion = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" {
		v += " " + rev[:min(len(rev), 12)]
		if dirty {
			v += "+dirty"
		}
	}
	return v
})
