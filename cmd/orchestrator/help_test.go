package main

import (
	"bytes"
	"strings"
	"testing"
)

// commands are the subcommands orchestrator runs (see run's switch).
var commands = []string{"serve", "call", "run", "tools", "dlq", "approvals", "status", "budgets", "bench"}

// TestHelpListsCommands: -h, --help and help name every command on a line
// of its own and then list serve's flags, and exit 0 as flag's help does.
func TestHelpListsCommands(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"help"}, {"--log-level", "warn", "-h"}} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), args, &stdout, &stderr); code != 0 {
			t.Errorf("%v: exit %d, want 0\n%s%s", args, code, stdout.String(), stderr.String())
		}
		out := stdout.String() + stderr.String()
		for _, c := range commands {
			if !strings.Contains(out, "\n  "+c+" ") {
				t.Errorf("%v: the help does not list the command %s:\n%s", args, c, out)
			}
		}
		for _, flag := range []string{"-nats-url", "-workers", "-demo-tools", "-builtin-tools", "-http "} {
			if !strings.Contains(out, "\n  "+flag) {
				t.Errorf("%v: the help does not list serve's flag %s:\n%s", args, flag, out)
			}
		}
	}
	// help COMMAND is COMMAND -h.
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"help", "call"}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stderr.String(), "-session") {
		t.Errorf("help call: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
}

// TestUsageSaysDefaultOnce: no flag of any command says its default twice
// (a usage text that names a mode-dependent default, and flag's own
// "(default …)" after it).
func TestUsageSaysDefaultOnce(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-h"}, {"serve", "-h"}, {"call", "-h"}, {"run", "-h"}, {"tools", "-h"}, {"status", "-h"}, {"bench", "-h"},
		{"dlq", "ls", "-h"}, {"dlq", "show", "-h"}, {"dlq", "replay", "-h"}, {"dlq", "purge", "-h"},
		{"budgets", "ls", "-h"}, {"budgets", "set", "-h"}, {"budgets", "reset", "-h"}, {"budgets", "rm", "-h"},
		{"approvals", "ls", "-h"}, {"approvals", "show", "-h"}, {"approvals", "approve", "-h"}, {"approvals", "deny", "-h"},
	} {
		var stdout, stderr bytes.Buffer
		run(t.Context(), args, &stdout, &stderr)
		out := stdout.String() + stderr.String()
		flags := flagEntries(out)
		if len(flags) == 0 {
			t.Errorf("%v: no flags in the usage:\n%s", args, out)
		}
		for _, f := range flags {
			if n := strings.Count(strings.ToLower(f), "default"); n > 1 {
				t.Errorf("%v: a flag says default %d times:\n%s", args, n, f)
			}
		}
	}
}

// flagEntries splits flag.PrintDefaults output into one entry per flag: its
// "  -name type" line and the usage lines under it.
func flagEntries(usage string) []string {
	var entries []string
	for line := range strings.SplitSeq(usage, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			entries = append(entries, line)
		case strings.HasPrefix(line, "    \t") && len(entries) > 0:
			entries[len(entries)-1] += "\n" + line
		}
	}
	return entries
}
