package builtin

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

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

// maxListScan bounds how many entries list_dir reads from one directory.
const maxListScan = 100_000

// The encodings read_file knows.
const (
	EncodingUTF8   = "utf-8"
	EncodingBase64 = "base64"
	EncodingLatin1 = "latin-1"
)

// encodingNames maps what a model may write to an encoding.
var encodingNames = map[string]string{
	"utf-8": EncodingUTF8, "utf8": EncodingUTF8,
	"base64":  EncodingBase64,
	"latin-1": EncodingLatin1, "latin1": EncodingLatin1, "iso-8859-1": EncodingLatin1,
}

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

func (w *workspace) readFile(ctx context.Context, input json.RawMessage) (tools.Output, error) {
	var in struct {
		Path     string `json:"path"`
		Encoding string `json:"encoding"`
	}
	if err := decode(input, &in); err != nil {
		return tools.Output{}, err
	}
	enc, ok := encodingNames[strings.ToLower(strings.TrimSpace(cmp.Or(in.Encoding, EncodingUTF8)))]
	if !ok {
		return tools.Output{}, classify.Invalid("encoding", `must be one of "utf-8", "base64", "latin-1"`)
	}
	p, err := w.cleanPath(in.Path)
	if err != nil {
		return tools.Output{}, err
	}
	if err := ctx.Err(); err != nil {
		return tools.Output{}, err
	}
	fi, err := w.root.Stat(p)
	if err != nil {
		return tools.Output{}, w.fileErr(in.Path, err)
	}
	if fi.IsDir() {
		return tools.Output{}, classify.Permanent(classify.WithMessage(errors.New("is a directory"),
			quotePath(in.Path)+" is a directory, not a file: use list_dir to see what it contains"))
	}
	if !fi.Mode().IsRegular() {
		return tools.Output{}, notRegular(in.Path)
	}
	f, err := w.root.OpenFile(p, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return tools.Output{}, w.fileErr(in.Path, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return tools.Output{}, w.fileErr(in.Path, err)
	}
	if !fi.Mode().IsRegular() { // swapped between Stat and OpenFile
		return tools.Output{}, notRegular(in.Path)
	}
	limit := w.cfg.MaxReadBytes
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return tools.Output{}, w.fileErr(in.Path, err)
	}
	cut := int64(len(data)) > limit
	if cut {
		data = data[:limit]
	}
	total := max(fi.Size(), int64(len(data)))

	var text, note string
	switch enc {
	case EncodingBase64:
		text = base64.StdEncoding.EncodeToString(data)
	case EncodingLatin1:
		text = latin1(data)
	default:
		if cut {
			data = data[:runeCut(data)]
		}
		if !utf8.Valid(data) {
			var bad int
			text, bad = replaceInvalid(data)
			note = fmt.Sprintf("[%s is not valid UTF-8: %s invalid bytes are shown as U+FFFD. "+
				"Read it with encoding \"base64\" for its exact bytes, or \"latin-1\".]", quotePath(in.Path), countText(int64(bad)))
		} else {
			text = string(data)
		}
	}
	if cut {
		shown := int64(len(data))
		more := fmt.Sprintf("%s bytes were left out", countText(total-shown))
		if total <= shown { // it grew while we read
			more = "the rest was left out"
		}
		note = joinNotes(fmt.Sprintf("[%s is %s bytes; only its first %s bytes are shown below and %s.]",
			quotePath(in.Path), countText(total), countText(shown), more), note)
	}
	if len(data) == 0 && !cut {
		return tools.Text(fmt.Sprintf("[%s is empty: 0 bytes.]", quotePath(in.Path))), nil
	}
	if note == "" {
		return tools.Text(text), nil
	}
	// The note comes first, as a block of its own, so that it survives if the
	// worker cuts the content to its own limit.
	out := tools.Text(note)
	out.Content = append(out.Content, tools.Text(text).Content...)
	return out, nil
}

func notRegular(p string) error {
	return classify.Permanent(classify.WithMessage(errors.New("not a regular file"),
		quotePath(p)+" is not a regular file (it is a device, socket or pipe) and cannot be read"))
}

func joinNotes(a, b string) string {
	if b == "" {
		return a
	}
	return a + "\n" + b
}

// runeCut returns the length of data without a UTF-8 sequence cut at its
// end.
func runeCut(data []byte) int {
	n := len(data)
	for i := 1; i <= utf8.UTFMax && i <= n; i++ {
		if utf8.RuneStart(data[n-i]) {
			if !utf8.FullRune(data[n-i:]) {
				return n - i
			}
			break
		}
	}
	return n
}

// replaceInvalid returns data as text with each byte that is not part of
// valid UTF-8 replaced by U+FFFD, and how many there were.
func replaceInvalid(data []byte) (string, int) {
	var b strings.Builder
	b.Grow(len(data) + 16)
	bad := 0
	for len(data) > 0 {
		r, size := utf8.DecodeRune(data)
		if r == utf8.RuneError && size == 1 {
			bad++
			b.WriteRune(utf8.RuneError)
		} else {
			b.Write(data[:size])
		}
		data = data[size:]
	}
	return b.String(), bad
}

// latin1 decodes ISO-8859-1: every byte is the code point of its value.
func latin1(data []byte) string {
	var b strings.Builder
	b.Grow(len(data) + len(data)/8)
	for _, c := range data {
		b.WriteRune(rune(c))
	}
	return b.String()
}

func (w *workspace) writeFile(ctx context.Context, input json.RawMessage) (tools.Output, error) {
	var in struct {
		Path    string `json:"path"`
		Content string `json:"content"`
		Mode    string `json:"mode"`
	}
	if err := decode(input, &in); err != nil {
		return tools.Output{}, err
	}
	if n := int64(len(in.Content)); n > w.cfg.MaxWriteBytes {
		return tools.Output{}, classify.Invalid("content", fmt.Sprintf(
			"is %s bytes, more than the limit of %s bytes: write the file in parts, the later ones with mode \"append\"",
			countText(n), countText(w.cfg.MaxWriteBytes)))
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	switch in.Mode {
	case "", "write":
	case "append":
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	default:
		return tools.Output{}, classify.Invalid("mode", `must be one of "write", "append"`)
	}
	p, err := w.cleanPath(in.Path)
	if err != nil {
		return tools.Output{}, err
	}
	if p == "." {
		return tools.Output{}, classify.Invalid("path", "must name a file, not the workspace root")
	}
	if strings.HasSuffix(filepath.ToSlash(strings.TrimSpace(in.Path)), "/") {
		return tools.Output{}, classify.Invalid("path", "must name a file, not a directory (it ends with /)")
	}
	if err := ctx.Err(); err != nil {
		return tools.Output{}, err
	}
	if dir := filepath.Dir(p); dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return tools.Output{}, w.fileErr(in.Path, err)
		}
	}
	if fi, err := w.root.Stat(p); err == nil && fi.IsDir() {
		return tools.Output{}, classify.Permanent(classify.WithMessage(errors.New("is a directory"),
			quotePath(in.Path)+" is a directory: choose a file name inside it"))
	}
	f, err := w.root.OpenFile(p, flags|openNonblock, 0o644)
	if err != nil {
		return tools.Output{}, w.fileErr(in.Path, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		f.Close()
		return tools.Output{}, classify.Permanent(classify.WithMessage(errors.New("not a regular file"),
			quotePath(in.Path)+" is not a regular file and cannot be written"))
	}
	_, werr := io.WriteString(f, in.Content)
	if fi, err = f.Stat(); err != nil && werr == nil {
		werr = err
	}
	if err := f.Close(); err != nil && werr == nil {
		werr = err
	}
	if werr != nil {
		return tools.Output{}, w.fileErr(in.Path, werr)
	}
	n := countText(int64(len(in.Content)))
	if in.Mode == "append" {
		return tools.Text(fmt.Sprintf("Appended %s bytes to %s; it now has %s bytes.",
			n, quotePath(in.Path), countText(fi.Size()))), nil
	}
	return tools.Text(fmt.Sprintf("Wrote %s bytes to %s.", n, quotePath(in.Path))), nil
}

// dirEntry is one line of list_dir.
type dirEntry struct {
	name string
	mode fs.FileMode
}

func (w *workspace) listDir(ctx context.Context, input json.RawMessage) (tools.Output, error) {
	var in struct {
		Path string `json:"path"`
	}
	if err := decode(input, &in); err != nil {
		return tools.Output{}, err
	}
	shown := cmp.Or(in.Path, ".")
	p, err := w.cleanPath(shown)
	if err != nil {
		return tools.Output{}, err
	}
	fi, err := w.root.Stat(p)
	if err != nil {
		return tools.Output{}, w.fileErr(shown, err)
	}
	if !fi.IsDir() {
		return tools.Output{}, classify.Permanent(classify.WithMessage(errors.New("not a directory"),
			quotePath(shown)+" is a file, not a directory: use read_file to read it"))
	}
	f, err := w.root.Open(p)
	if err != nil {
		return tools.Output{}, w.fileErr(shown, err)
	}
	defer f.Close()
	var entries []dirEntry
	complete := true
	for {
		if err := ctx.Err(); err != nil {
			return tools.Output{}, err
		}
		batch, err := f.ReadDir(1024)
		for _, e := range batch {
			entries = append(entries, dirEntry{name: e.Name(), mode: e.Type()})
		}
		if errors.Is(err, io.EOF) || err == nil && len(batch) == 0 {
			break
		}
		if err != nil {
			return tools.Output{}, w.fileErr(shown, err)
		}
		if len(entries) >= maxListScan {
			complete = false
			break
		}
	}
	slices.SortFunc(entries, func(a, b dirEntry) int { return strings.Compare(a.name, b.name) })

	var b strings.Builder
	switch n := len(entries); {
	case n == 0:
		fmt.Fprintf(&b, "%s is an empty directory.", quotePath(shown))
		return tools.Text(b.String()), nil
	case !complete:
		fmt.Fprintf(&b, "%s has more than %s entries; of the first %s read, sorted by name:\n",
			quotePath(shown), countText(maxListScan), countText(int64(n)))
	case n == 1:
		fmt.Fprintf(&b, "%s has 1 entry:\n", quotePath(shown))
	default:
		fmt.Fprintf(&b, "%s has %s entries:\n", quotePath(shown), countText(int64(n)))
	}
	limit := min(len(entries), w.cfg.MaxListEntries)
	for _, e := range entries[:limit] {
		rel := filepath.Join(p, e.name)
		switch {
		case e.mode.IsDir():
			fmt.Fprintf(&b, "dir      %s/\n", e.name)
		case e.mode&fs.ModeSymlink != 0:
			fmt.Fprintf(&b, "symlink  %s\n", e.name)
		case e.mode.IsRegular():
			size := ""
			if fi, err := w.root.Lstat(rel); err == nil {
				size = " (" + countText(fi.Size()) + " bytes)"
			}
			fmt.Fprintf(&b, "file     %s%s\n", e.name, size)
		default:
			fmt.Fprintf(&b, "other    %s\n", e.name)
		}
	}
	if rest := len(entries) - limit; rest > 0 {
		fmt.Fprintf(&b, "[%s more entries were left out. List a subdirectory, or read a file you know the name of.]\n",
			countText(int64(rest)))
	}
	return tools.Text(strings.TrimSuffix(b.String(), "\n")), nil
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

// sizeText writes a byte size for a description: "1 MiB", "256 KiB",
// "1,000 bytes".
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return countText(n) + " bytes"
}

// countText writes n with thousands separators.
func countText(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// decode reads the (already validated) input.
func decode(input json.RawMessage, v any) error {
	if err := json.Unmarshal(input, v); err != nil {
		return classify.Invalid("", "does not match the tool's schema")
	}
	return nil
}
