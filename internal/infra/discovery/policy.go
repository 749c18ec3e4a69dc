package discovery

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"reflect"

	"github.com/toolpool/toolpool/pkg/tools"
)

// versionHexLen is the length of a toolVersion: 16 hex characters, 64 bits
// of a SHA-256.
const versionHexLen = 16

// toolVersion is the short hex digest (16 characters) that identifies a
// tool's implementation as its workers announce it: the build that
// serves it (Announcement.Version) and its definition (name, description,
// input schema). Lookup answers it as pooltype.ToolInfo.Version, so that a
// cached result never outlives a change of the tool's build or of what the
// model is told of it.
func toolVersion(build string, def tools.Definition) string {
	h := sha256.New()
	for _, part := range []string{"toolpool tool version 1", build, def.Name, def.Description, string(def.InputSchema)} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return hex.EncodeToString(h.Sum(nil))[:versionHexLen]
}

// checkPolicy makes a's cost, cache and approval safe to apply and says
// what it changed ("" for nothing). A worker's registry refuses bad
// settings, so this only matters for an announcement written by hand or
// by a broken worker; it fails safe: a cost out of range is brought into
// it, a bad cache (or one on a tool neither idempotent nor read-only) is
// dropped, and a bad approval rule becomes "every call needs approval".
func checkPolicy(a *Announcement) string {
	var problem string
	switch {
	case a.Cost < 0:
		problem = fmt.Sprintf("cost %d is negative: counted as 1", a.Cost)
		a.Cost = 0
	case a.Cost > tools.CostMax:
		problem = fmt.Sprintf("cost %d is above %d: counted as %d", a.Cost, tools.CostMax, tools.CostMax)
		a.Cost = tools.CostMax
	}
	if a.Cache != nil {
		hints := tools.Hints{}
		if a.Hints != nil {
			hints = *a.Hints
		}
		field, why := a.Cache.Check()
		if field == "" && !tools.Cacheable(a.Idempotent, hints) {
			field, why = "cache", "the tool is neither idempotent nor read-only"
		}
		if field != "" {
			problem = join(problem, fmt.Sprintf("cache: %s %s: not cached", field, why))
			a.Cache = nil
		}
	}
	if a.Approval != nil {
		if field, why := a.Approval.Check(); field != "" {
			problem = join(problem, fmt.Sprintf("approval.%s %s: every call needs approval", field, why))
			a.Approval = &tools.ApprovalRule{Timeout: min(max(a.Approval.Timeout, 0), tools.ApprovalTimeoutMax)}
		}
	}
	return problem
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// samePolicy reports whether a and b announce the same cost, cache and
// approval rule.
func samePolicy(a, b Announcement) bool {
	return a.Cost == b.Cost && reflect.DeepEqual(a.Cache, b.Cache) && reflect.DeepEqual(a.Approval, b.Approval)
}
