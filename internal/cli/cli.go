// Package cli holds what the toolpool binaries share: the one way a
// command is defined (Command), flags for NATS connections, logging, tools
// and catalogs, and the exit codes.
//
// # A command
//
// A Command is a name, a synopsis, a summary for its parent's list, a help
// text, its flags (registered on a standard library flag.FlagSet) and a Run
// that returns an error. The flags' values live in the closure that builds
// the command, so build the tree afresh for each run of the binary:
//
//	func greetCommand() *cli.Command {
//		var loud bool
//		return &cli.Command{
//			Name:    "greet",
//			Args:    "[flags] NAME",
//			Summary: "say hello",
//			Help:    "Says hello to NAME. Exit 0, or 2 on usage errors.",
//			MinArgs: 1, MaxArgs: 1,
//			Flags: func(fs *flag.FlagSet) {
//				fs.BoolVar(&loud, "loud", false, "shout")
//			},
//			Run: func(ctx context.Context, env *cli.Env, args []string) error {
//				if args[0] == "" {
//					return cli.Usagef("NAME must not be empty") // exit 2
//				}
//				fmt.Fprintln(env.Stdout, "hello", args[0])
//				return nil // exit 0
//			},
//		}
//	}
//
//	func main() {
//		root := &cli.Command{Name: "tool", Commands: []*cli.Command{greetCommand()}}
//		os.Exit(cli.Main(ctx, root, os.Args[1:], os.Stdout, os.Stderr))
//	}
//
// A binary with one command (a worker) is a root with Run and no Commands.
//
// Main does the rest the same way for every command: "tool -h" and "tool
// help" list the commands; "tool greet -h" and "tool help greet" print the
// usage line, the help and the flags (flag.PrintDefaults); a bad flag or
// too many arguments print one line saying so and exit ExitUsage; too few
// print the usage and exit ExitUsage. Run's error decides the exit code:
// nil is ExitOK, Usagef ExitUsage, Unavailable (no connection) ExitUsage,
// Exit(code) that code silently, any other error ExitIsError; a message is
// printed after the command's path ("tool greet: …") on stderr.
//
// Env.Given tells Run which flags were given, for defaults that depend on
// other flags (serve's --workers, which depends on --nats-url).
package cli

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// Exit codes of the binaries.
const (
	ExitOK      = 0 // success
	ExitIsError = 1 // the tool call ended with is_error, or the command failed
	ExitUsage   = 2 // bad flags or arguments, or no connection
)

// UsageError is a mistake in the command line; binaries exit with ExitUsage.
type UsageError struct{ Msg string }

// Error is the mistake, as the binary prints it after its name.
func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a *UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// LogFlags are the logging flags.
type LogFlags struct {
	Format string
	Level  string
}

// Register adds --log-format and --log-level to fs.
func (l *LogFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&l.Format, "log-format", "text", "log format: text or json")
	fs.StringVar(&l.Level, "log-level", "info", "log level: debug, info, warn or error")
}

// Logger builds the logger the flags ask for, writing to w.
func (l *LogFlags) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.Level)); err != nil {
		return nil, Usagef("--log-level %q: want debug, info, warn or error", l.Level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(l.Format) {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, Usagef("--log-format %q: want text or json", l.Format)
	}
}

// EnvOr returns the environment variable key, or def when it is unset or
// empty.
func EnvOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
