package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/tools"
)

// writeFile is write_file: content written to, or appended to, the file at
// "path", its parent directories created.
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
