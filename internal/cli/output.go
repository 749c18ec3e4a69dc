package cli

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON prints v as indented JSON (two spaces) and a newline: the
// output of the commands' --json flags.
func WriteJSON(w io.Writer, v any) error {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(out))
	return err
}
