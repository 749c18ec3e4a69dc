package builtin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/tools"
)

// maxListScan bounds how many entries list_dir reads from one directory.
const maxListScan = 100_000

// dirEntry is one line of list_dir.
type dirEntry struct {
	name string
	mode fs.FileMode
}

// listDir is list_dir: the entries of the directory at "path", sorted by
// name, at most MaxListEntries of them.
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
	entries, complete, err := w.readDir(ctx, p, shown)
	if err != nil {
		return tools.Output{}, err
	}
	return tools.Text(w.listing(p, shown, entries, complete)), nil
}

// readDir reads the entries of the directory at p (shown as the model
// wrote it), sorted by name. complete is false when there were more than
// maxListScan.
func (w *workspace) readDir(ctx context.Context, p, shown string) (entries []dirEntry, complete bool, err error) {
	fi, err := w.root.Stat(p)
	if err != nil {
		return nil, false, w.fileErr(shown, err)
	}
	if !fi.IsDir() {
		return nil, false, classify.Permanent(classify.WithMessage(errors.New("not a directory"),
			quotePath(shown)+" is a file, not a directory: use read_file to read it"))
	}
	f, err := w.root.Open(p)
	if err != nil {
		return nil, false, w.fileErr(shown, err)
	}
	defer f.Close()
	complete = true
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		batch, err := f.ReadDir(1024)
		for _, e := range batch {
			entries = append(entries, dirEntry{name: e.Name(), mode: e.Type()})
		}
		if errors.Is(err, io.EOF) || err == nil && len(batch) == 0 {
			break
		}
		if err != nil {
			return nil, false, w.fileErr(shown, err)
		}
		if len(entries) >= maxListScan {
			complete = false
			break
		}
	}
	slices.SortFunc(entries, func(a, b dirEntry) int { return strings.Compare(a.name, b.name) })
	return entries, complete, nil
}

// listing writes the entries of the directory at p for the model: a
// heading, one line per entry with its type (and a file's size), and a
// note on the entries left out.
func (w *workspace) listing(p, shown string, entries []dirEntry, complete bool) string {
	var b strings.Builder
	switch n := len(entries); {
	case n == 0:
		return quotePath(shown) + " is an empty directory."
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
		w.writeEntry(&b, p, e)
	}
	if rest := len(entries) - limit; rest > 0 {
		fmt.Fprintf(&b, "[%s more entries were left out. List a subdirectory, or read a file you know the name of.]\n",
			countText(int64(rest)))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// writeEntry writes the line of the entry e of the directory at p.
func (w *workspace) writeEntry(b *strings.Builder, p string, e dirEntry) {
	switch {
	case e.mode.IsDir():
		fmt.Fprintf(b, "dir      %s/\n", e.name)
	case e.mode&fs.ModeSymlink != 0:
		fmt.Fprintf(b, "symlink  %s\n", e.name)
	case e.mode.IsRegular():
		size := ""
		if fi, err := w.root.Lstat(filepath.Join(p, e.name)); err == nil {
			size = " (" + countText(fi.Size()) + " bytes)"
		}
		fmt.Fprintf(b, "file     %s%s\n", e.name, size)
	default:
		fmt.Fprintf(b, "other    %s\n", e.name)
	}
}
