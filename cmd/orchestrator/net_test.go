package main

import (
	"io"
	"strings"
	"testing"
)

// TestServeRefusesBadInstance: --instance becomes a subject token
// (tools.result.<instance>) and part of consumer names; a dotted, wildcard
// or overlong one is refused by name before anything starts.
func TestServeRefusesBadInstance(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"orch.1", "a*", "a b", strings.Repeat("o", 5000)} {
		_, err := parseServe([]string{"--instance", bad}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--instance") || !strings.Contains(err.Error(), "subject token") {
			t.Errorf("--instance %.20q: err %v; want one naming --instance", bad, err)
		}
	}
	if _, err := parseServe([]string{"--instance", "orch-eu_1"}, io.Discard); err != nil {
		t.Errorf("--instance orch-eu_1: %v", err)
	}
}
