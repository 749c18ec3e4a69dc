package budget

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/toolpool/toolpool/internal/infra/subject"
	"github.com/toolpool/toolpool/pkg/classify"
)

// Period is a budget's calendar period, in UTC.
type Period string

// The calendar periods.
const (
	Minute Period = "minute"
	Hour   Period = "hour"
	Day    Period = "day"
	Month  Period = "month"
)

// Limits of a Def.
const (
	// MaxNameLen is the longest budget name.
	MaxNameLen = 64
	// MinWindow and MaxWindow bound a rolling window.
	MinWindow = time.Minute
	MaxWindow = 31 * 24 * time.Hour
	// SoftDefault is the soft threshold of a Def that sets none.
	SoftDefault = 0.8
	// maxTools caps a Def's tools list.
	maxTools = 256
)

// Def is a budget as an operator defines it (one entry of the bucket, as
// JSON).
type Def struct {
	// Name identifies the budget: 1 to 64 letters, digits, '_', '.' or '-'.
	Name string `json:"name"`
	// Tenant or Key (an API key's name) is whose calls it counts: exactly
	// one of them.
	Tenant string `json:"tenant,omitempty"`
	Key    string `json:"key,omitempty"`
	// Tools are the tools it covers; empty: every tool.
	Tools []string `json:"tools,omitempty"`
	// Period is a calendar period; Window a rolling one (1m to 31d):
	// exactly one of them.
	Period Period        `json:"period,omitempty"`
	Window time.Duration `json:"-"`
	// Limit is what the budget allows per period, at least 1.
	Limit int64 `json:"limit"`
	// Cost says it counts the tools' cost units (catalog cost:), not calls.
	Cost bool `json:"cost,omitempty"`
	// Soft is the share of Limit past which calls' results carry a note
	// (0 < Soft <= 1; 1: never). 0 means SoftDefault.
	Soft float64 `json:"soft,omitempty"`
	// ResetAt is when an operator last reset the budget's spending.
	ResetAt time.Time `json:"reset_at,omitzero"`
}

// ErrInvalid is matched (errors.Is) by Validate's errors.
var ErrInvalid = errors.New("invalid budget")

// invalid is a Validate error naming field.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

// ValidName reports whether name may name a budget.
func ValidName(name string) bool {
	if name == "" || len(name) > MaxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Validate returns an error (matching ErrInvalid) that names the first bad
// field of d.
func (d Def) Validate() error {
	switch {
	case !ValidName(d.Name):
		return invalid("name", "%q must be 1 to %d letters, digits, '_', '.' or '-'", d.Name, MaxNameLen)
	case d.Tenant != "" && d.Key != "":
		return invalid("tenant", "give a tenant or a key, not both")
	case d.Tenant == "" && d.Key == "":
		return invalid("tenant", "give the tenant (or the API key) whose calls the budget counts")
	case len(d.Tenant) > 256 || strings.ContainsAny(d.Tenant, "\x00\n\r"):
		return invalid("tenant", "%q is not a tenant", d.Tenant)
	case len(d.Key) > 256 || strings.ContainsAny(d.Key, "\x00\n\r"):
		return invalid("key", "%q is not an API key's name", d.Key)
	case len(d.Tools) > maxTools:
		return invalid("tools", "at most %d tools, got %d", maxTools, len(d.Tools))
	case d.Limit < 1:
		return invalid("limit", "must be at least 1, got %d", d.Limit)
	case math.IsNaN(d.Soft) || d.Soft < 0 || d.Soft > 1:
		return invalid("soft", "must be above 0 and at most 1 (1: no note), got %v", d.Soft)
	}
	for _, t := range d.Tools {
		if !subject.ValidToken(t) {
			return invalid("tools", "%q is not a tool name: %s", t, subject.TokenRule)
		}
	}
	switch {
	case d.Period != "" && d.Window != 0:
		return invalid("period", "give a period or a rolling window, not both")
	case d.Period == "" && d.Window == 0:
		return invalid("period", "give a period (minute, hour, day, month) or a rolling window")
	case d.Window != 0 && (d.Window < MinWindow || d.Window > MaxWindow):
		return invalid("window", "must be from 1m to 31d, got %s", classify.FormatDuration(d.Window))
	case d.Window != 0 && d.Window%time.Second != 0:
		return invalid("window", "must be whole seconds, got %s", d.Window)
	case d.Window == 0 && !d.Period.valid():
		return invalid("period", "%q: want minute, hour, day or month", d.Period)
	}
	return nil
}

// valid reports whether p is one of the calendar periods.
func (p Period) valid() bool {
	return p == Minute || p == Hour || p == Day || p == Month
}

// soft is the effective soft threshold.
func (d Def) soft() float64 {
	if d.Soft == 0 {
		return SoftDefault
	}
	return d.Soft
}

// Who is whose calls the budget counts: "tenant acme", "key ci-bot".
func (d Def) Who() string {
	if d.Key != "" {
		return "key " + d.Key
	}
	return "tenant " + d.Tenant
}

// PeriodWords is the budget's period as the model reads it: "per day",
// "per rolling 90m".
func (d Def) PeriodWords() string {
	if d.Window != 0 {
		return "per rolling " + windowWords(d.Window)
	}
	return "per " + string(d.Period)
}

// windowWords is a rolling window as operators write it: "7d", "36h",
// "90m", else as classify.FormatDuration writes it.
func windowWords(w time.Duration) string {
	for _, u := range []struct {
		d      time.Duration
		suffix string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}} {
		if w >= u.d && w%u.d == 0 {
			return strconv.FormatInt(int64(w/u.d), 10) + u.suffix
		}
	}
	return classify.FormatDuration(w)
}

// Unit is what the budget counts: "calls" or "cost units".
func (d Def) Unit() string {
	if d.Cost {
		return "cost units"
	}
	return "calls"
}

// covers reports whether d applies to a call of tool.
func (d Def) covers(tool string) bool {
	if len(d.Tools) == 0 {
		return true
	}
	for _, t := range d.Tools {
		if t == tool {
			return true
		}
	}
	return false
}

// token is name as a subject token and a KV key: a '.' (not allowed in a
// token, and never in a name otherwise) becomes '='.
func token(name string) string { return strings.ReplaceAll(name, ".", "=") }

// SubjectPrefix is the prefix of the counter subjects.
const SubjectPrefix = "toolpool.spend."

// subjectFilter is the filter of every counter subject of the budget.
func subjectFilter(name string) string { return SubjectPrefix + token(name) + ".>" }

// periodID is the id of the calendar period p that holds t, and the period's
// end.
func periodID(p Period, t time.Time) (string, time.Time) {
	t = t.UTC()
	switch p {
	case Minute:
		s := t.Truncate(time.Minute)
		return "m" + s.Format("200601021504"), s.Add(time.Minute)
	case Hour:
		s := t.Truncate(time.Hour)
		return "h" + s.Format("2006010215"), s.Add(time.Hour)
	case Month:
		s := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		return "M" + s.Format("200601"), s.AddDate(0, 1, 0)
	}
	s := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return "d" + s.Format("20060102"), s.AddDate(0, 0, 1)
}

// slotsPerWindow is how many sub-periods a rolling window is split in.
const slotsPerWindow = 60

// slot is the sub-period of a rolling window w: whole seconds, at least one,
// and the number of them the window spans.
func slot(w time.Duration) (time.Duration, int64) {
	g := max((w / slotsPerWindow).Truncate(time.Second), time.Second)
	n := int64((w + g - 1) / g)
	return g, n
}

// slotID is the id of the sub-period idx of size g.
func slotID(g time.Duration, idx int64) string {
	return "r" + strconv.FormatInt(int64(g/time.Second), 10) + "_" + strconv.FormatInt(idx, 10)
}

// slotIndex is the index of the sub-period of size g holding t.
func slotIndex(g time.Duration, t time.Time) int64 {
	return t.UnixNano() / int64(g)
}

// slotStart is the start of the sub-period idx of size g.
func slotStart(g time.Duration, idx int64) time.Time {
	return time.Unix(0, idx*int64(g)).UTC()
}

// defJSON is Def as the bucket stores it: the window as a Go duration
// ("1h30m0s"), readable with `nats kv get`.
type defJSON struct {
	Name    string    `json:"name"`
	Tenant  string    `json:"tenant,omitempty"`
	Key     string    `json:"key,omitempty"`
	Tools   []string  `json:"tools,omitempty"`
	Period  Period    `json:"period,omitempty"`
	Window  string    `json:"window,omitempty"`
	Limit   int64     `json:"limit"`
	Cost    bool      `json:"cost,omitempty"`
	Soft    float64   `json:"soft,omitempty"`
	ResetAt time.Time `json:"reset_at,omitzero"`
}

// MarshalJSON writes d with its window as a duration string.
func (d Def) MarshalJSON() ([]byte, error) {
	j := defJSON{Name: d.Name, Tenant: d.Tenant, Key: d.Key, Tools: d.Tools, Period: d.Period, Limit: d.Limit,
		Cost: d.Cost, Soft: d.Soft, ResetAt: d.ResetAt}
	if d.Window != 0 {
		j.Window = d.Window.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Def) UnmarshalJSON(b []byte) error {
	var j defJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*d = Def{Name: j.Name, Tenant: j.Tenant, Key: j.Key, Tools: j.Tools, Period: j.Period, Limit: j.Limit,
		Cost: j.Cost, Soft: j.Soft, ResetAt: j.ResetAt}
	if j.Window != "" {
		w, err := time.ParseDuration(j.Window)
		if err != nil {
			return invalid("window", "%q is not a duration", j.Window)
		}
		d.Window = w
	}
	return nil
}
