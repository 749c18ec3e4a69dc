// Package cli holds what the toolpool binaries share: flags for NATS
// connections and logging, and exit codes.
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
