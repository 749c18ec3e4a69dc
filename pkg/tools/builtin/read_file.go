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
	"strings"
	"unicode/utf8"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/tools"
)

// The encodings read_file knows.
const (
	encodingUTF8   = "utf-8"
	encodingBase64 = "base64"
	encodingLatin1 = "latin-1"
)

// encodingNames maps what a model may write to an encoding.
var encodingNames = map[string]string{
	"utf-8": encodingUTF8, "utf8": encodingUTF8,
	"base64":  encodingBase64,
	"latin-1": encodingLatin1, "latin1": encodingLatin1, "iso-8859-1": encodingLatin1,
}

// readFile is read_file: the file at "path", at most MaxReadBytes of it,
// as text in the chosen encoding, with a note when it was cut or was not
// valid UTF-8.
func (w *workspace) readFile(ctx context.Context, input json.RawMessage) (tools.Output, error) {
	var in struct {
		Path     string `json:"path"`
		Encoding string `json:"encoding"`
	}
	if err := decode(input, &in); err != nil {
		return tools.Output{}, err
	}
	enc, ok := encodingNames[strings.ToLower(strings.TrimSpace(cmp.Or(in.Encoding, encodingUTF8)))]
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
	f, fi, err := w.openRegular(p, in.Path)
	if err != nil {
		return tools.Output{}, err
	}
	defer f.Close()
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
	text, shown, note := fileText(data, enc, cut, in.Path)
	if cut {
		note = joinNotes(cutNote(in.Path, total, int64(shown)), note)
	}
	if shown == 0 && !cut {
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

// openRegular opens the regular file at p (name as the model wrote it)
// and returns it with its FileInfo. A directory, a device, a socket or a
// pipe is refused without reading from it.
func (w *workspace) openRegular(p, name string) (*os.File, fs.FileInfo, error) {
	fi, err := w.root.Stat(p)
	if err != nil {
		return nil, nil, w.fileErr(name, err)
	}
	if fi.IsDir() {
		return nil, nil, classify.Permanent(classify.WithMessage(errors.New("is a directory"),
			quotePath(name)+" is a directory, not a file: use list_dir to see what it contains"))
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, notRegular(name)
	}
	f, err := w.root.OpenFile(p, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, nil, w.fileErr(name, err)
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, w.fileErr(name, err)
	}
	if !fi.Mode().IsRegular() { // swapped between Stat and OpenFile
		f.Close()
		return nil, nil, notRegular(name)
	}
	return f, fi, nil
}

// fileText writes data, read from the file name (and cut when the file is
// longer), as text in the encoding enc. shown is how many bytes of data the
// text holds: a UTF-8 sequence cut at the end is left out. note says when
// invalid UTF-8 was replaced.
func fileText(data []byte, enc string, cut bool, name string) (text string, shown int, note string) {
	switch enc {
	case encodingBase64:
		return base64.StdEncoding.EncodeToString(data), len(data), ""
	case encodingLatin1:
		return latin1(data), len(data), ""
	}
	if cut {
		data = data[:runeCut(data)]
	}
	if utf8.Valid(data) {
		return string(data), len(data), ""
	}
	text, bad := replaceInvalid(data)
	note = fmt.Sprintf("[%s is not valid UTF-8: %s invalid bytes are shown as U+FFFD. "+
		"Read it with encoding \"base64\" for its exact bytes, or \"latin-1\".]", quotePath(name), countText(int64(bad)))
	return text, len(data), note
}

// cutNote says that only the first shown of the total bytes of the file
// name are shown.
func cutNote(name string, total, shown int64) string {
	more := fmt.Sprintf("%s bytes were left out", countText(total-shown))
	if total <= shown { // it grew while we read
		more = "the rest was left out"
	}
	return fmt.Sprintf("[%s is %s bytes; only its first %s bytes are shown below and %s.]",
		quotePath(name), countText(total), countText(shown), more)
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
