package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

// testTree is a binary with a default command, a leaf that takes
// arguments, and a group of two.
func testTree(ran *[]string) *Command {
	leaf := func(name string, interspersed bool, run func(args []string) error) *Command {
		var n int
		return &Command{
			Name: name, Summary: name + " things", MaxArgs: -1, Interspersed: interspersed,
			Flags: func(fs *flag.FlagSet) { fs.IntVar(&n, "n", 1, "how many") },
			Run: func(_ context.Context, env *Env, args []string) error {
				*ran = append(*ran, env.Path+" "+strings.Join(args, ",")+" n="+string(rune('0'+n)))
				return run(args)
			},
		}
	}
	ok := func([]string) error { return nil }
	return &Command{
		Name: "bin", Default: "serve",
		Commands: []*Command{
			leaf("serve", false, ok),
			{Name: "one", Summary: "one argument", MinArgs: 1, MaxArgs: 1, Run: func(context.Context, *Env, []string) error { return nil }},
			{Name: "grp", Summary: "a group", Help: "The group.", Commands: []*Command{
				func() *Command { c := leaf("ls", true, ok); c.Aliases = []string{"list"}; return c }(),
				leaf("fail", false, func(args []string) error {
					switch args[0] {
					case "usage":
						return Usagef("bad %s", "thing")
					case "conn":
						return Unavailable(errors.New("no server"))
					case "silent":
						return Exit(3)
					case "show":
						return ErrShowUsage
					}
					return errors.New("it broke")
				}),
			}},
		},
	}
}

func TestCommandExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		code    int
		ran     string // the run recorded, "" for none
		stderr  string // a part of stderr
		noStder bool
	}{
		{args: nil, code: ExitOK, ran: "bin serve  n=1"},
		{args: []string{"-n", "3"}, code: ExitOK, ran: "bin serve  n=3"},
		{args: []string{"-n", "3", "-h"}, code: ExitOK, stderr: "serve's flags (bin [serve] [flags]):\n  -n int"},
		{args: []string{"-h"}, code: ExitOK, stderr: "\n  grp     a group\n"},
		{args: []string{"--frob"}, code: ExitUsage, stderr: "bin serve: flag provided but not defined: -frob\nRun \"bin serve -h\" for its flags.\n"},
		{args: []string{"-n", "x"}, code: ExitUsage, stderr: `invalid value "x" for flag -n`},
		{args: []string{"nope"}, code: ExitUsage, stderr: "bin: unknown command \"nope\""},
		{args: []string{"one"}, code: ExitUsage, stderr: "usage: bin one [flags]\n"},
		{args: []string{"one", "a", "b"}, code: ExitUsage, stderr: "bin one: unexpected argument \"b\"\n"},
		{args: []string{"grp"}, code: ExitUsage, stderr: "usage: bin grp COMMAND [flags]\n\nThe group.\n\ncommands:\n  ls      ls things\n"},
		{args: []string{"grp", "-h"}, code: ExitOK, stderr: "commands:\n  ls "},
		{args: []string{"grp", "help"}, code: ExitOK, stderr: "commands:\n  ls "},
		{args: []string{"grp", "ls", "a", "-n", "2", "b", "--", "-c"}, code: ExitOK, ran: "bin grp ls a,b,-c n=2"},
		{args: []string{"grp", "list", "x"}, code: ExitOK, ran: "bin grp ls x n=1"},
		{args: []string{"grp", "fail", "x", "-n", "2"}, code: ExitIsError, ran: "bin grp fail x,-n,2 n=1", stderr: "bin grp fail: it broke\n"},
		{args: []string{"grp", "fail", "usage"}, code: ExitUsage, ran: "bin grp fail usage n=1", stderr: "bin grp fail: bad thing\n"},
		{args: []string{"grp", "fail", "conn"}, code: ExitUsage, ran: "bin grp fail conn n=1", stderr: "bin grp fail: no server\n"},
		{args: []string{"grp", "fail", "silent"}, code: 3, ran: "bin grp fail silent n=1", noStder: true},
		{args: []string{"grp", "fail", "show"}, code: ExitUsage, ran: "bin grp fail show n=1", stderr: "usage: bin grp fail [flags]\n"},
		{args: []string{"help", "grp", "ls"}, code: ExitOK, stderr: "usage: bin grp ls [flags]\n\nflags:\n  -n int\n    \thow many (default 1)\n"},
		{args: []string{"help", "nope"}, code: ExitUsage, stderr: "unknown command \"nope\""},
	} {
		var ran []string
		var stdout, stderr bytes.Buffer
		code := Main(t.Context(), testTree(&ran), tc.args, &stdout, &stderr)
		if code != tc.code {
			t.Errorf("%q: exit %d, want %d\n%s", tc.args, code, tc.code, stderr.String())
		}
		if got := strings.Join(ran, ";"); got != tc.ran {
			t.Errorf("%q: ran %q, want %q", tc.args, got, tc.ran)
		}
		if !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%q: stderr lacks %q:\n%s", tc.args, tc.stderr, stderr.String())
		}
		if tc.noStder && stderr.Len() > 0 {
			t.Errorf("%q: stderr %q, want none", tc.args, stderr.String())
		}
	}
}

// "bin help" is the help asked for: on stdout, exit 0, listing every
// command and the default's flags.
func TestCommandHelpOnStdout(t *testing.T) {
	t.Parallel()
	var ran []string
	var stdout, stderr bytes.Buffer
	if code := Main(t.Context(), testTree(&ran), []string{"help"}, &stdout, &stderr); code != ExitOK || stderr.Len() > 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	for _, want := range []string{"usage: bin COMMAND [flags]\n", "\n  serve   serve things\n", "\n  one     one argument\n", "\n  help    ", "\n  -n int\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, stdout.String())
		}
	}
}

// Given says which flags were on the command line.
func TestCommandGiven(t *testing.T) {
	t.Parallel()
	var n int
	var given, notGiven bool
	root := &Command{Name: "bin", Commands: []*Command{{Name: "c",
		Flags: func(fs *flag.FlagSet) { fs.IntVar(&n, "n", 1, "n"); fs.Int("m", 1, "m") },
		Run: func(_ context.Context, env *Env, _ []string) error {
			given, notGiven = env.Given("n"), env.Given("m")
			return nil
		}}}}
	var out bytes.Buffer
	if code := Main(t.Context(), root, []string{"c", "-n", "1"}, &out, &out); code != 0 || !given || notGiven {
		t.Errorf("exit %d, Given(n) = %v, Given(m) = %v; want 0, true, false", code, given, notGiven)
	}
}
