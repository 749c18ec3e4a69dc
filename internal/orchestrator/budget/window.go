package budget

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// slots are the sub-periods of a rolling window at a moment, with what is
// spent in each.
type slots struct {
	g    time.Duration   // a sub-period
	n    int64           // sub-periods in the window
	cur  int64           // the current one's index
	vals map[int64]int64 // index → spent, for the indexes in the window
}

// newSlots returns the window of d at now, with nothing spent.
func newSlots(d Def, now time.Time) slots {
	g, n := slot(d.Window)
	return slots{g: g, n: n, cur: slotIndex(g, now), vals: map[int64]int64{}}
}

// lo is the index of the oldest sub-period in the window.
func (w slots) lo() int64 { return w.cur - w.n + 1 }

// sum is what is spent in the window.
func (w slots) sum() int64 {
	var s int64
	for idx, v := range w.vals {
		if idx >= w.lo() && idx <= w.cur {
			s += v
		}
	}
	return s
}

// oldestLeaves is how long until the oldest spending in the window leaves
// it; 0 when nothing is spent.
func (w slots) oldestLeaves(now time.Time) time.Duration {
	for idx := w.lo(); idx <= w.cur; idx++ {
		if w.vals[idx] > 0 {
			return max(slotStart(w.g, idx+w.n).Sub(now), 0)
		}
	}
	return 0
}

// roomIn is how long until units fit in the window of limit, the spent
// total being spent: when enough of the oldest spending has left it. A cost
// larger than the limit never fits: the window's length.
func (w slots) roomIn(now time.Time, limit, spent, units int64) time.Duration {
	var left int64
	for idx := w.lo(); idx <= w.cur; idx++ {
		left += w.vals[idx]
		if spent-left+units <= limit {
			return max(slotStart(w.g, idx+w.n).Sub(now), time.Second)
		}
	}
	return slotStart(w.g, w.cur+w.n).Sub(now)
}

// slotSubject is the counter subject of d's sub-period idx of size g.
func slotSubject(d Def, g time.Duration, idx int64) string {
	return SubjectPrefix + token(d.Name) + "." + slotID(g, idx)
}

// window reads the spending of d's rolling window at now: the counters the
// stream holds for it, one read each.
func (s *store) window(ctx context.Context, d Def, now time.Time) (slots, error) {
	w := newSlots(d, now)
	idxs, err := s.slotsPresent(ctx, d, w.g)
	if err != nil {
		return w, err
	}
	for _, idx := range idxs {
		if idx < w.lo() || idx > w.cur {
			continue
		}
		v, err := s.value(ctx, slotSubject(d, w.g, idx))
		if err != nil {
			return w, err
		}
		w.vals[idx] = v
	}
	return w, nil
}

// slotsPresent lists the sub-periods of size g that the stream holds a
// counter of for d.
func (s *store) slotsPresent(ctx context.Context, d Def, g time.Duration) ([]int64, error) {
	info, err := s.stream.Info(ctx, js.WithSubjectFilter(subjectFilter(d.Name)))
	if err != nil {
		return nil, fmt.Errorf("budget: the spending of %s: %w", d.Name, err)
	}
	prefix := SubjectPrefix + token(d.Name) + "." + "r" + strconv.FormatInt(int64(g/time.Second), 10) + "_"
	var out []int64
	for subj := range info.State.Subjects {
		rest, ok := strings.CutPrefix(subj, prefix)
		if !ok {
			continue
		}
		if idx, err := strconv.ParseInt(rest, 10, 64); err == nil {
			out = append(out, idx)
		}
	}
	return out, nil
}
