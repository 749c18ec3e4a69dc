package console

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
)

// Bounds of the dead letters' newest-first reads.
const (
	// newestWindowMin is the first window of sequences a newest-first
	// page reads; each next window, further back, is twice as wide, up to
	// newestWindowMax.
	newestWindowMin = 128
	newestWindowMax = 1 << 16
	// groupScanMax is how many of the newest matching dead letters the
	// group view counts.
	groupScanMax = 10000
)

// seqRange is the part of TOOL_DLQ a listing reads: sequences lo to hi.
type seqRange struct{ lo, hi uint64 }

// newestFirst returns at most limit of the dead letters f selects in r,
// newest first, each as keep makes it, and whether older ones match. It
// reads TOOL_DLQ backwards in windows of sequences, each twice as wide as
// the one before: a page of letters that match densely costs one window,
// and one that match rarely about a read of the letters down to them.
// What it holds stays within limit+1 values, however many match.
func newestFirst[T any](ctx context.Context, s *dlq.Store, f dlq.Filter, r seqRange, limit int, keep func(*dlq.Letter) T) ([]T, bool, error) {
	var out []T
	window := uint64(max(2*limit, newestWindowMin))
	for hi := r.hi; hi >= r.lo && hi > 0 && len(out) <= limit; {
		from := r.lo
		if hi-r.lo >= window {
			from = hi - window + 1
		}
		need := limit + 1 - len(out)
		wf := f
		wf.After, wf.UpTo = from-1, hi
		var batch []T // the window's matches, oldest first; the newest need of them kept
		err := s.Scan(ctx, wf, func(l *dlq.Letter) error {
			batch = append(batch, keep(l))
			if len(batch) >= 2*need {
				batch = append(batch[:0], batch[len(batch)-need:]...)
			}
			return nil
		})
		if err != nil {
			return out, false, err
		}
		if len(batch) > need {
			batch = batch[len(batch)-need:]
		}
		slices.Reverse(batch)
		out = append(out, batch...)
		hi = from - 1
		window = min(window*2, newestWindowMax)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// dlqRange is the part of TOOL_DLQ a listing of f up to upTo reads: from
// the stream's first sequence (or, with f.Since, the first letter stored
// since then) to upTo. ok is false when nothing is there.
func (c *Console) dlqRange(ctx context.Context, f dlq.Filter, upTo uint64) (r seqRange, ok bool, err error) {
	st, err := c.cfg.JetStream.Stream(ctx, jetstream.StreamDLQ)
	if err != nil {
		return r, false, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return r, false, err
	}
	r = seqRange{lo: max(info.State.FirstSeq, 1), hi: min(upTo, info.State.LastSeq)}
	if info.State.Msgs == 0 || r.hi < r.lo {
		return r, false, nil
	}
	if !f.Since.IsZero() {
		first, found, err := firstSince(ctx, st, f, r.hi)
		if err != nil || !found {
			return r, false, err
		}
		r.lo = max(r.lo, first)
	}
	return r, true, nil
}

// firstSince is the sequence of the first of f's tool's dead letters stored
// at or after f.Since, up to hi, read through an ephemeral consumer that
// starts there; found is false when there is none.
func firstSince(ctx context.Context, st js.Stream, f dlq.Filter, hi uint64) (seq uint64, found bool, err error) {
	subject := jetstream.DLQSubjectPrefix + ">"
	if f.Tool != "" {
		subject = jetstream.DLQSubject(f.Tool)
	}
	since := f.Since
	cons, err := st.CreateOrUpdateConsumer(ctx, js.ConsumerConfig{
		Description: "toolpool: console dlq since", FilterSubject: subject,
		DeliverPolicy: js.DeliverByStartTimePolicy, OptStartTime: &since,
		AckPolicy: js.AckNonePolicy, InactiveThreshold: time.Minute, MemoryStorage: true,
	})
	if err != nil {
		return 0, false, fmt.Errorf("dlq: find the letters since %s: %w", since.UTC().Format(time.RFC3339), err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = st.DeleteConsumer(dctx, cons.CachedInfo().Name)
	}()
	if cons.CachedInfo().NumPending == 0 {
		return 0, false, nil
	}
	m, err := cons.Next(js.FetchMaxWait(5 * time.Second))
	if err != nil {
		return 0, false, fmt.Errorf("dlq: find the letters since %s: %w", since.UTC().Format(time.RFC3339), err)
	}
	meta, err := m.Metadata()
	if err != nil {
		return 0, false, err
	}
	if meta.Sequence.Stream > hi {
		return 0, false, nil
	}
	return meta.Sequence.Stream, true, nil
}

// codeGroup is the dead letters of one error code, in the group view.
type codeGroup struct {
	Code    string // "" for letters without one
	Class   string // the class of its newest letter's last attempt
	N       int
	Tools   []string // up to groupToolsMax, by count
	More    int      // tools beyond those
	Reasons []string
	Newest  time.Time
	Query   string // the list of this group's letters
}

// groupToolsMax is how many tools a group names.
const groupToolsMax = 4

// groupKey is what the group view keeps of a letter.
type groupKey struct {
	code, class, tool, reason string
	stored                    time.Time
}

func groupKeyOf(l *dlq.Letter) groupKey {
	k := groupKey{code: l.Code(), tool: l.Tool(), reason: string(l.Reason()), stored: l.Stored}
	if l.Entry != nil && len(l.Entry.Attempts) > 0 {
		k.class = string(l.Entry.Attempts[len(l.Entry.Attempts)-1].Class)
	} else {
		k.class = l.Header.Get(settle.HeaderClass)
	}
	return k
}

// groupByCode counts keys (newest first) by code: the largest group first.
// query is the list's filter, to which each group's link adds its code.
func groupByCode(keys []groupKey, query func(code string) string) []codeGroup {
	type acc struct {
		g       codeGroup
		tools   map[string]int
		reasons map[string]bool
	}
	var order []string
	by := map[string]*acc{}
	for _, k := range keys {
		a := by[k.code]
		if a == nil {
			a = &acc{g: codeGroup{Code: k.code, Class: k.class, Newest: k.stored}, tools: map[string]int{}, reasons: map[string]bool{}}
			by[k.code] = a
			order = append(order, k.code)
		}
		a.g.N++
		a.tools[k.tool]++
		if !a.reasons[k.reason] {
			a.reasons[k.reason] = true
			a.g.Reasons = append(a.g.Reasons, k.reason)
		}
	}
	out := make([]codeGroup, 0, len(order))
	for _, code := range order {
		a := by[code]
		tools := make([]string, 0, len(a.tools))
		for t := range a.tools {
			tools = append(tools, t)
		}
		slices.SortFunc(tools, func(x, y string) int { return cmp.Or(a.tools[y]-a.tools[x], cmp.Compare(x, y)) })
		if len(tools) > groupToolsMax {
			a.g.More = len(tools) - groupToolsMax
			tools = tools[:groupToolsMax]
		}
		a.g.Tools = tools
		slices.Sort(a.g.Reasons)
		if code != "" {
			a.g.Query = query(code)
		}
		out = append(out, a.g)
	}
	slices.SortStableFunc(out, func(x, y codeGroup) int { return cmp.Or(y.N-x.N, cmp.Compare(x.Code, y.Code)) })
	return out
}
