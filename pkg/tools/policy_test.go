package tools

import (
	"encoding/json"
	"testing"
)

func TestApprovalRuleRequires(t *testing.T) {
	t.Parallel()
	rule := &ApprovalRule{When: []ApprovalMatch{
		{Field: "input.path", Pattern: "/etc/**"},
		{Field: "input.target.host", Pattern: "*.prod.example"},
		{Field: "input.force", Pattern: "true"},
	}}
	tests := []struct {
		input string
		want  bool
	}{
		{`{"path": "/etc/passwd"}`, true},
		{`{"path": "/etc/ssh/sshd_config"}`, true},
		{`{"path": "/home/u/notes"}`, false},
		{`{"target": {"host": "db.prod.example"}}`, true},
		{`{"target": {"host": "db.staging.example"}}`, false},
		{`{"target": "db.prod.example"}`, false},
		{`{"force": true}`, true},
		{`{"force": false}`, false},
		{`{}`, false},
		{`not json`, true},
	}
	for _, tt := range tests {
		if got := rule.Requires(json.RawMessage(tt.input)); got != tt.want {
			t.Errorf("Requires(%s) = %v, want %v", tt.input, got, tt.want)
		}
	}
	if !(&ApprovalRule{}).Requires(json.RawMessage(`{}`)) {
		t.Error("a rule without conditions must require approval of every call")
	}
	if (*ApprovalRule)(nil).Requires(json.RawMessage(`{}`)) {
		t.Error("no rule must require nothing")
	}
}

func TestApprovalRuleCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rule  ApprovalRule
		field string
	}{
		{ApprovalRule{}, ""},
		{ApprovalRule{Timeout: -1}, "timeout"},
		{ApprovalRule{When: []ApprovalMatch{{Field: "path", Pattern: "x"}}}, "when[0].field"},
		{ApprovalRule{When: []ApprovalMatch{{Field: "input.path", Pattern: "/a/[b"}}}, "when[0].pattern"},
		{ApprovalRule{When: []ApprovalMatch{{Field: "input.path", Pattern: "/a/*"}, {Field: "input.x", Pattern: ""}}}, "when[1].pattern"},
	}
	for _, tt := range tests {
		field, problem := tt.rule.Check()
		if field != tt.field || (field != "") != (problem != "") {
			t.Errorf("Check(%+v) = %q, %q; want field %q", tt.rule, field, problem, tt.field)
		}
	}
}
