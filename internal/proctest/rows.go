package proctest

import (
	"strings"
	"sync"
)

// Rows collects the rows of a Markdown table that a suite's tests add,
// possibly at once, for its TestMain to print after m.Run.
type Rows struct {
	mu   sync.Mutex
	rows []string
}

// Add appends one row (a line without its newline).
func (r *Rows) Add(row string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, row)
}

// Table returns header (its own lines, each ending in a newline) followed
// by the rows, or "" when no row was added.
func (r *Rows) Table(header string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.rows) == 0 {
		return ""
	}
	return header + strings.Join(r.rows, "\n")
}
