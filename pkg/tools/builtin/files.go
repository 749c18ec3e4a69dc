package builtin

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Defaults of FileConfig.
const (
	// MaxReadBytesDefault is the most of a file read_file returns.
	MaxReadBytesDefault = 1 << 20
	// MaxWriteBytesDefault is the largest content write_file accepts.
	MaxWriteBytesDefault = 1 << 20
	// MaxListEntriesDefault is the most entries list_dir shows.
	MaxListEntriesDefault = 1000
	// FileTimeout is the per-attempt timeout of the file tools.
	FileTimeout = 10 * time.Second
)

// FileConfig configures the file tools. Zero fields take the defaults.
type FileConfig struct {
	// Root is the workspace directory; the file tools cannot reach outside
	// it. Created if missing. Required.
	Root string
	// MaxReadBytes is the most of a file read_file returns; the rest of a
	// larger file is left out, with a note. Default MaxReadBytesDefault.
	MaxReadBytes int64
	// MaxWriteBytes is the largest content write_file accepts. Default
	// MaxWriteBytesDefault.
	MaxWriteBytes int64
	// MaxListEntries is the most entries list_dir shows. Default
	// MaxListEntriesDefault.
	MaxListEntries int
}

func (c FileConfig) withDefaults() FileConfig {
	c.MaxReadBytes = cmp.Or(c.MaxReadBytes, MaxReadBytesDefault)
	c.MaxWriteBytes = cmp.Or(c.MaxWriteBytes, MaxWriteBytesDefault)
	c.MaxListEntries = cmp.Or(c.MaxListEntries, MaxListEntriesDefault)
	return c
}

func (c FileConfig) validate() error {
	switch {
	case c.Root == "":
		return errors.New("builtin: FileConfig.Root is required")
	case c.MaxReadBytes < 0:
		return fmt.Errorf("builtin: FileConfig.MaxReadBytes must not be negative, got %d", c.MaxReadBytes)
	case c.MaxWriteBytes < 0:
		return fmt.Errorf("builtin: FileConfig.MaxWriteBytes must not be negative, got %d", c.MaxWriteBytes)
	case c.MaxListEntries < 0:
		return fmt.Errorf("builtin: FileConfig.MaxListEntries must not be negative, got %d", c.MaxListEntries)
	}
	return nil
}

// workspace is the opened root the file tools share.
type workspace struct {
	cfg  FileConfig
	root *os.Root
	// escape is the error os.Root gives for a path that leads out of the
	// root. The standard library does not export it; it is captured once
	// from the root itself, so it is matched by identity, not by text.
	escape error
}

// NewFileTools opens (creating it if missing) the workspace directory
// cfg.Root and returns read_file, write_file and list_dir, confined to it
// with os.Root: a path that is absolute, climbs out with "..", or goes
// through a symbolic link that leads outside fails with a permanent error
// saying the path escapes the workspace, and touches nothing outside. Close
// the returned io.Closer when the tools are no longer used.
func NewFileTools(cfg FileConfig) ([]tools.Tool, io.Closer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(cfg.Root, 0o755); err != nil {
		return nil, nil, fmt.Errorf("builtin: create the workspace: %w", err)
	}
	root, err := os.OpenRoot(cfg.Root)
	if err != nil {
		return nil, nil, fmt.Errorf("builtin: open the workspace: %w", err)
	}
	w := &workspace{cfg: cfg, root: root}
	_, err = root.Stat("..")
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Err == nil {
		root.Close()
		return nil, nil, fmt.Errorf("builtin: the workspace root does not refuse \"..\" (got %v)", err)
	}
	w.escape = pe.Err
	return []tools.Tool{w.readFileTool(), w.writeFileTool(), w.listDirTool()}, root, nil
}

func (w *workspace) readFileTool() tools.Tool {
	return tools.Tool{
		Name: "read_file",
		Description: "Reads a file from the workspace and returns its content. " +
			"The path is relative to the workspace root (for example \"notes/todo.md\"); " +
			"absolute paths and \"..\" that leave the workspace are refused. " +
			"encoding is \"utf-8\" (default) for text, \"base64\" for the exact bytes of a binary file, " +
			"or \"latin-1\". Files larger than " + sizeText(w.cfg.MaxReadBytes) + " are cut, with a note. " +
			"Use list_dir first when you do not know the file's name.",
		InputSchema: tools.ReadFileSchema,
		Timeout:     FileTimeout,
		Idempotent:  true,
		Hints:       readFileHints,
		Handler:     w.readFile,
	}
}

func (w *workspace) writeFileTool() tools.Tool {
	return tools.Tool{
		Name: "write_file",
		Description: "Writes text to a file in the workspace, creating the file and its parent directories if needed. " +
			"The path is relative to the workspace root. mode \"write\" (default) replaces the file's content; " +
			"\"append\" adds to its end. At most " + sizeText(w.cfg.MaxWriteBytes) + " per call: " +
			"write larger files in parts with \"append\".",
		InputSchema: tools.WriteFileSchema,
		Timeout:     FileTimeout,
		Idempotent:  false, // "append" twice appends twice
		Hints:       writeFileHints,
		Handler:     w.writeFile,
	}
}

func (w *workspace) listDirTool() tools.Tool {
	return tools.Tool{
		Name: "list_dir",
		Description: "Lists a directory of the workspace: each entry's name, type (file, dir, symlink) and size, " +
			"sorted by name, at most " + strconv.Itoa(w.cfg.MaxListEntries) + " entries. " +
			"The path is relative to the workspace root; \".\" (default) is the root itself.",
		InputSchema: ListDirSchema,
		Timeout:     FileTimeout,
		Idempotent:  true,
		Hints:       listDirHints,
		Handler:     w.listDir,
	}
}

// cleanPath checks a path the model gave and returns it in the form
// os.Root takes. Absolute paths and paths that climb out of the root are
// refused here, before anything is opened; links are left to os.Root.
func (w *workspace) cleanPath(p string) (string, error) {
	p = strings.TrimSpace(p)
	if p == "" {
		p = "."
	}
	if strings.ContainsRune(p, 0) {
		return "", classify.Invalid("path", "must not contain NUL characters")
	}
	slashed := filepath.ToSlash(p)
	if filepath.IsAbs(p) || path.IsAbs(slashed) || filepath.VolumeName(p) != "" {
		return "", w.escapeErr(p, nil)
	}
	c := path.Clean(slashed)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", w.escapeErr(p, nil)
	}
	return filepath.FromSlash(c), nil
}

// escapeErr is the error for a path that leads out of the workspace.
func (w *workspace) escapeErr(p string, err error) error {
	if err == nil {
		err = errors.New("path escapes the workspace")
	}
	return classify.Permanent(classify.WithMessage(err,
		"path escapes the workspace: "+quotePath(p)+" leads outside it. Use a path relative to the workspace root, "+
			"without \"..\" that leaves it, and not through a link that points outside it"))
}

// fileErr turns an error of a file operation on path p into one for the
// model.
func (w *workspace) fileErr(p string, err error) error {
	var errno syscall.Errno
	switch {
	case err == nil:
		return nil
	case errors.Is(err, w.escape):
		return w.escapeErr(p, err)
	case errors.Is(err, fs.ErrNotExist):
		return classify.WithMessage(err, "there is no file or directory "+quotePath(p)+" in the workspace")
	case errors.Is(err, fs.ErrPermission):
		return classify.WithMessage(err, "permission to access "+quotePath(p)+" was denied")
	case errors.As(err, &errno) && errno == syscall.ENOTDIR:
		return classify.Permanent(classify.WithMessage(err, "a part of the path "+quotePath(p)+" is a file, not a directory"))
	case errors.As(err, &errno) && errno == syscall.EISDIR:
		return classify.Permanent(classify.WithMessage(err, quotePath(p)+" is a directory"))
	case errors.As(err, &errno) && errno == syscall.ELOOP:
		return classify.Permanent(classify.WithMessage(err, "the path "+quotePath(p)+" goes through too many symbolic links"))
	case errors.As(err, &errno) && errno == syscall.ENAMETOOLONG:
		return classify.Invalid("path", "is too long")
	case errors.As(err, &errno) && errno == syscall.ENOSPC:
		return classify.Transient(classify.WithMessage(err, "the workspace's disk is full"))
	}
	return err
}

// quotePath quotes a path the model gave, for a message, cut to a sane
// length.
func quotePath(p string) string {
	const maxLen = 200
	if len(p) > maxLen {
		p = p[:runeCut([]byte(p[:maxLen]))] + "…"
	}
	return strconv.Quote(p)
}
