package mcpback_test

import (
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/tools"
)

// TestTemplatePolicy: the template's cost and approval rule go to every
// tool of the server, its cache only to the tools the server says are
// read-only (or idempotent); the others are served without one.
func TestTemplatePolicy(t *testing.T) {
	t.Parallel()
	cfg := stdioConfig()
	cfg.Template.Cost = 3
	cfg.Template.Cache = &tools.CachePolicy{TTL: time.Minute}
	cfg.Template.Approval = &tools.ApprovalRule{Timeout: time.Hour}
	reg, _ := startSet(t, cfg)
	echo, ok := reg.Lookup("go_echo")
	if !ok || echo.Cost != 3 || echo.Cache == nil || echo.Cache.TTL != time.Minute || echo.Approval == nil {
		t.Fatalf("go_echo (read-only) registered as %+v", echo)
	}
	fail, ok := reg.Lookup("go_fail")
	if !ok || fail.Cost != 3 || fail.Cache != nil || fail.Approval == nil || fail.Approval.Timeout != time.Hour {
		t.Fatalf("go_fail (not read-only) registered as %+v", fail)
	}
	if cfg.Template.Cache == nil {
		t.Error("the template's cache was changed")
	}
}
