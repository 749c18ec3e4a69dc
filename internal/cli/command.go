package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Command is one command of a binary: a leaf that runs (Run), or a group
// of subcommands (Commands), or both for a binary's root. Build the tree
// afresh for each run of the binary: the flags live in the closures of
// Flags and Run.
type Command struct {
	// Name is the word that selects the command ("ls"); for a binary's
	// root, the binary's name.
	Name string
	// Aliases are other words that select it ("list" for "ls").
	Aliases []string
	// Args is the synopsis after the command's path in its usage line,
	// e.g. "[flags] TOOL 'JSON'". Default "[flags]", or "COMMAND [flags]"
	// for a group.
	Args string
	// Summary is the command's line (or lines) in its parent's list of
	// commands.
	Summary string
	// Help is printed under the usage line by "COMMAND -h": what the
	// command does, its exit codes.
	Help string
	// Flags registers the command's flags on fs.
	Flags func(fs *flag.FlagSet)
	// MinArgs and MaxArgs bound the positional arguments Run takes: fewer
	// prints the usage, more says "unexpected argument"; both exit
	// ExitUsage. MaxArgs -1 is any number; the zero values take none.
	MinArgs, MaxArgs int
	// Interspersed lets flags come after positional arguments ("dlq show
	// 12 --json"); "--" ends the flags.
	Interspersed bool
	// Run runs the command with its positional arguments. Its error sets
	// the exit code: nil ExitOK; a *UsageError (Usagef) ExitUsage; an
	// *ExitError its Code; any other error ExitIsError. A message is
	// printed after the command's path, on stderr.
	Run func(ctx context.Context, env *Env, args []string) error
	// Commands are the subcommands. "help" is added to every group.
	Commands []*Command
	// Default names the subcommand that runs when the arguments name none
	// (or start with a flag): orchestrator's "serve".
	Default string
}

// Env is what a command runs with.
type Env struct {
	// Stdout and Stderr are the binary's outputs.
	Stdout, Stderr io.Writer
	// Path is the command's path: "orchestrator dlq ls".
	Path string
	// Flags is the command's flag set, parsed:
	// Run asks it which flags were given (Given) for defaults that depend
	// on other flags.
	Flags *flag.FlagSet
}

// Given reports whether the flag name was given on the command line.
func (env *Env) Given(name string) bool {
	given := false
	if env.Flags != nil {
		env.Flags.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	}
	return given
}

// ExitError ends a command with Code, after printing Err (unless nil).
type ExitError struct {
	Code int
	Err  error
}

// Error is Err's message, or the exit code when there is none.
func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

// Unwrap is Err.
func (e *ExitError) Unwrap() error { return e.Err }

// Exit ends a command with code and no message: for a command that printed
// its outcome itself (a tool_result with is_error). Exit(ExitOK) is nil.
func Exit(code int) error {
	if code == ExitOK {
		return nil
	}
	return &ExitError{Code: code}
}

// Unavailable is err as the binaries report a connection that could not
// be made: exit ExitUsage, with err's message.
func Unavailable(err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// ErrShowUsage, returned by Run, prints the command's usage and exits
// ExitUsage.
var ErrShowUsage = errors.New("cli: show the usage")

// Main runs the command that args select in the tree under root and
// returns the exit code: the one call of a binary's main.
func Main(ctx context.Context, root *Command, args []string, stdout, stderr io.Writer) int {
	return root.run(ctx, &Env{Stdout: stdout, Stderr: stderr, Path: root.Name}, args)
}

func (c *Command) run(ctx context.Context, env *Env, args []string) int {
	if len(c.Commands) > 0 {
		return c.dispatch(ctx, env, args)
	}
	return c.exec(ctx, env, args)
}

// dispatch picks the subcommand of a group.
func (c *Command) dispatch(ctx context.Context, env *Env, args []string) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if def := c.sub(c.Default); def != nil {
			// "orchestrator -h" (or --log-level warn -h) asks about the
			// binary, not only its default command.
			if isHelp(def.newFlagSet(io.Discard).Parse(args)) {
				c.printHelp(env.Stderr, env.Path)
				return ExitOK
			}
			return def.run(ctx, env.child(def), args)
		}
		c.printHelp(env.Stderr, env.Path)
		if len(args) > 0 && isHelpArg(args[0]) {
			return ExitOK
		}
		return ExitUsage
	}
	name, rest := args[0], args[1:]
	if name == "help" {
		if len(rest) > 0 && rest[0] != "help" { // help COMMAND [SUBCOMMAND]: COMMAND [SUBCOMMAND] -h
			sub := c.sub(rest[0])
			if sub == nil {
				return c.unknown(env, rest[0])
			}
			return sub.run(ctx, env.child(sub), append(rest[1:len(rest):len(rest)], "-h"))
		}
		w := env.Stdout // "orchestrator help": the help asked for is the output
		if env.Path != c.Name {
			w = env.Stderr // "orchestrator dlq help" as "orchestrator dlq -h"
		}
		c.printHelp(w, env.Path)
		return ExitOK
	}
	sub := c.sub(name)
	if sub == nil {
		return c.unknown(env, name)
	}
	return sub.run(ctx, env.child(sub), rest)
}

func (c *Command) unknown(env *Env, name string) int {
	fmt.Fprintf(env.Stderr, "%s: unknown command %q\n\n", env.Path, name)
	c.printCommands(env.Stderr, env.Path)
	return ExitUsage
}

// exec parses a leaf's flags and runs it.
func (c *Command) exec(ctx context.Context, env *Env, args []string) int {
	if c.Run == nil {
		return ExitUsage
	}
	fs := c.newFlagSet(env.Stderr)
	pos, err := parse(fs, args, c.Interspersed)
	switch {
	case isHelp(err):
		c.printUsage(env.Stderr, env.Path, fs)
		return ExitOK
	case err != nil:
		fmt.Fprintf(env.Stderr, "%s: %v\nRun \"%s -h\" for its flags.\n", env.Path, err, env.Path)
		return ExitUsage
	case len(pos) < c.MinArgs:
		c.printUsage(env.Stderr, env.Path, fs)
		return ExitUsage
	case c.MaxArgs >= 0 && len(pos) > c.MaxArgs:
		fmt.Fprintf(env.Stderr, "%s: unexpected argument %q\n", env.Path, pos[c.MaxArgs])
		return ExitUsage
	}
	env.Flags = fs
	return env.exitCode(c.Run(ctx, env, pos), c)
}

// exitCode prints what err says and returns its exit code.
func (env *Env) exitCode(err error, c *Command) int {
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, ErrShowUsage) {
		c.printUsage(env.Stderr, env.Path, c.newFlagSet(env.Stderr))
		return ExitUsage
	}
	code := ExitIsError
	var ee *ExitError
	var ue *UsageError
	switch {
	case errors.As(err, &ee):
		code = ee.Code
		if ee.Err == nil {
			return code
		}
	case errors.As(err, &ue):
		code = ExitUsage
	}
	fmt.Fprintf(env.Stderr, "%s: %v\n", env.Path, err)
	return code
}

func (env *Env) child(c *Command) *Env {
	return &Env{Stdout: env.Stdout, Stderr: env.Stderr, Path: env.Path + " " + c.Name}
}

func (c *Command) sub(name string) *Command {
	if name == "" {
		return nil
	}
	for _, s := range c.Commands {
		if s.Name == name || slices.Contains(s.Aliases, name) {
			return s
		}
	}
	return nil
}

// newFlagSet is the command's flag set, quiet: Command prints the errors
// and the usage itself.
func (c *Command) newFlagSet(w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if c.Flags != nil {
		c.Flags(fs)
	}
	fs.SetOutput(w)
	return fs
}

// parse parses args; with interspersed, flags and positional arguments in
// any order. It returns the positional ones.
func parse(fs *flag.FlagSet, args []string, interspersed bool) ([]string, error) {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	defer fs.SetOutput(out)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if !interspersed || len(args) == 0 {
			return append(pos, args...), nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

func isHelp(err error) bool { return errors.Is(err, flag.ErrHelp) }

func isHelpArg(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

// synopsis is the command's usage line after its path.
func (c *Command) synopsis() string {
	switch {
	case c.Args != "":
		return c.Args
	case len(c.Commands) > 0:
		return "COMMAND [flags]"
	}
	return "[flags]"
}

// printUsage is a leaf's "-h": usage line, help, flags.
func (c *Command) printUsage(w io.Writer, path string, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s %s\n", path, c.synopsis())
	if c.Help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(c.Help, "\n"))
	}
	if hasFlags(fs) {
		fmt.Fprint(w, "\nflags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

// printHelp is a group's help: usage line, help, the commands, and the
// default command's flags.
func (c *Command) printHelp(w io.Writer, path string) {
	c.printCommands(w, path)
	if def := c.sub(c.Default); def != nil && def.Flags != nil {
		fs := def.newFlagSet(w)
		if hasFlags(fs) {
			fmt.Fprintf(w, "\n%s's flags (%s [%s] %s):\n", def.Name, path, def.Name, def.synopsis())
			fs.PrintDefaults()
		}
	}
}

// printCommands is a group's usage line, help and commands.
func (c *Command) printCommands(w io.Writer, path string) {
	fmt.Fprintf(w, "usage: %s %s\n", path, c.synopsis())
	if c.Help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(c.Help, "\n"))
	}
	fmt.Fprint(w, "\ncommands:\n")
	for _, s := range c.Commands {
		args := ""
		if s.Args != "" && s.Args != "[flags]" {
			args = path + " " + s.Name + " " + s.Args
		}
		writeEntry(w, s.Name, s.Summary, args)
	}
	writeEntry(w, "help", "help COMMAND is COMMAND -h: the command's flags", "")
	fmt.Fprintf(w, "\nRun \"%s COMMAND -h\" (or \"%s help COMMAND\") for a command's flags.\n", path, path)
}

// writeEntry writes a command in a list: its name and summary, then its
// synopsis when there is one.
func writeEntry(w io.Writer, name, summary, synopsis string) {
	lines := strings.Split(strings.TrimRight(summary, "\n"), "\n")
	fmt.Fprintf(w, "  %-7s %s\n", name, lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(w, "          %s\n", l)
	}
	if synopsis != "" {
		fmt.Fprintf(w, "          %s\n", synopsis)
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}
