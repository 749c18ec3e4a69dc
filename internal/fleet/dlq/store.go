package dlq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
)

// ErrNotFound matches (with errors.Is) the error for a dead letter that is
// not in TOOL_DLQ (never was, or was replayed or purged meanwhile).
var ErrNotFound = errors.New("dlq: no dead letter with this sequence")

// scanBatch is how many dead letters Scan fetches per request.
const scanBatch = 256

// scanFetchWait bounds each fetch of Scan.
const scanFetchWait = 5 * time.Second

// Store reads and edits the dead letters in TOOL_DLQ. Create one with
// NewStore; it is safe for concurrent use.
type Store struct {
	js     js.JetStream
	stream js.Stream
}

// NewStore binds to TOOL_DLQ, which must exist (see jetstream.Provision).
func NewStore(ctx context.Context, j js.JetStream) (*Store, error) {
	s, err := j.Stream(ctx, jetstream.StreamDLQ)
	if err != nil {
		return nil, fmt.Errorf("dlq: stream %s: %w", jetstream.StreamDLQ, err)
	}
	return &Store{js: j, stream: s}, nil
}

// Filter selects dead letters. The zero Filter selects all.
type Filter struct {
	// Tool keeps the dead letters of this tool only.
	Tool string
	// Reason keeps the dead letters set aside for this reason only.
	Reason classify.Fate
	// Since keeps the dead letters stored at or after this time only.
	Since time.Time
	// UpTo, when set, keeps the dead letters with a sequence up to it only
	// (to act on exactly what an earlier listing showed).
	UpTo uint64
	// After, when set, keeps the dead letters with a sequence after it
	// only: the next page of a listing (Page) starts there on the server,
	// without reading the letters before it.
	After uint64
	// Code keeps the dead letters whose last attempt failed with this
	// error code only (Toolpool-Code).
	Code string
	// Tenant keeps the dead letters of this tenant's calls only.
	Tenant string
	// Text keeps the dead letters whose stored entry (error, attempts'
	// messages, the call and its input) contains this text, in any case.
	Text string
	// CallID keeps the dead letters whose call id (the model's tool_use
	// id) is this or starts with it.
	CallID string
}

// readsBodies reports whether f needs more than the subject and the
// sequence range, so that a purge must go letter by letter.
func (f Filter) readsBodies() bool {
	return f.Reason != "" || !f.Since.IsZero() || f.Code != "" || f.Tenant != "" || f.Text != "" || f.After > 0 || f.CallID != ""
}

// check refuses a Tool that is not one subject token: "*" or ">" would
// select every tool's dead letters, which a purge would then delete.
func (f Filter) check() error {
	if f.Tool == "" {
		return nil
	}
	if err := jetstream.CheckToken("tool", f.Tool); err != nil {
		return fmt.Errorf("dlq: filter: %w", err)
	}
	return nil
}

// subject is the TOOL_DLQ subject f covers.
func (f Filter) subject() string {
	if f.Tool != "" {
		return jetstream.DLQSubject(f.Tool)
	}
	return jetstream.DLQSubjectPrefix + ">"
}

// Letter is one dead letter as TOOL_DLQ stores it.
type Letter struct {
	// Seq is its sequence in TOOL_DLQ: what the dlq commands take.
	Seq uint64
	// Subject is tools.dlq.<tool>.
	Subject string
	// Stored is when TOOL_DLQ stored it.
	Stored time.Time
	// Header holds the Toolpool-* headers.
	Header nats.Header
	// Data is the message body: the encoded settle.Entry.
	Data []byte
	// Entry is the decoded body; nil when it does not decode (then Err
	// says why).
	Entry *settle.Entry
	// Err is the decode error of a body that is not an settle.Entry.
	Err error
}

// newLetter decodes a stored message.
func newLetter(seq uint64, subject string, stored time.Time, h nats.Header, data []byte) *Letter {
	l := &Letter{Seq: seq, Subject: subject, Stored: stored, Header: h, Data: data}
	l.Entry, l.Err = settle.Decode(data)
	return l
}

// Tool is the letter's tool: from its entry, else from its subject.
func (l *Letter) Tool() string {
	if l.Entry != nil && l.Entry.Tool != "" {
		return l.Entry.Tool
	}
	return strings.TrimPrefix(l.Subject, jetstream.DLQSubjectPrefix)
}

// Reason is the letter's reason: from its entry, else from its header.
func (l *Letter) Reason() classify.Fate {
	if l.Entry != nil {
		return l.Entry.Reason
	}
	return classify.Fate(l.Header.Get(settle.HeaderReason))
}

// matches reports whether l passes the parts of f a subject filter does
// not cover.
func (f Filter) matches(l *Letter) bool {
	if f.Reason != "" && l.Reason() != f.Reason {
		return false
	}
	if !f.Since.IsZero() && l.Stored.Before(f.Since) {
		return false
	}
	if f.After > 0 && l.Seq <= f.After {
		return false
	}
	if f.Code != "" && l.Code() != f.Code {
		return false
	}
	if f.Tenant != "" && l.Tenant() != f.Tenant {
		return false
	}
	if f.Text != "" && !containsFold(l.Data, f.Text) {
		return false
	}
	return f.CallID == "" || strings.HasPrefix(l.CallID(), f.CallID)
}

// CallID is the id of the letter's call: from its entry, else from its
// header.
func (l *Letter) CallID() string {
	if l.Entry != nil && l.Entry.CallID != "" {
		return l.Entry.CallID
	}
	return l.Header.Get(settle.HeaderCallID)
}

// Code is the error code of the letter's last attempt: from its entry,
// else from its header.
func (l *Letter) Code() string {
	if l.Entry != nil {
		if n := len(l.Entry.Attempts); n > 0 {
			return l.Entry.Attempts[n-1].Code
		}
	}
	return l.Header.Get(settle.HeaderCode)
}

// Tenant is the tenant of the letter's call; "" when it has none or the
// call does not decode.
func (l *Letter) Tenant() string {
	if l.Entry == nil || len(l.Entry.Call) == 0 {
		return ""
	}
	var c struct {
		Tenant string `json:"tenant"`
	}
	if json.Unmarshal(l.Entry.Call, &c) != nil {
		return ""
	}
	return c.Tenant
}

// prematches reports whether a stored message may pass f, from what is
// known without decoding it: the reason, code and call id headers, the text in
// its body. Scan skips the rest undecoded, so a filter that matches few
// letters costs little more than reading them.
func (f Filter) prematches(h nats.Header, data []byte) bool {
	if v := h.Get(settle.HeaderReason); f.Reason != "" && v != "" && v != string(f.Reason) {
		return false
	}
	if f.Code != "" && h.Get(settle.HeaderReason) != "" && h.Get(settle.HeaderCode) != f.Code {
		return false
	}
	if id := h.Get(settle.HeaderCallID); f.CallID != "" && id != "" && !strings.HasPrefix(id, f.CallID) {
		return false
	}
	return f.Text == "" || containsFold(data, f.Text)
}

// containsFold reports whether data contains text, ignoring case, without
// copying data.
func containsFold(data []byte, text string) bool {
	n := len(text)
	if n == 0 {
		return true
	}
	t := []byte(text)
	lo, up := t[0], t[0]
	if 'a' <= lo && lo <= 'z' {
		up = lo - 'a' + 'A'
	} else if 'A' <= lo && lo <= 'Z' {
		lo = lo - 'A' + 'a'
	}
	for i := 0; i+n <= len(data); i++ {
		if c := data[i]; (c == lo || c == up) && bytes.EqualFold(data[i:i+n], t) {
			return true
		}
	}
	return false
}

// Scan calls fn for each dead letter f selects, oldest first, up to the
// last one stored when Scan began: letters dead-lettered meanwhile (a
// replayed call failing again, say) are not visited. An error from fn stops
// the scan and is returned.
//
// It reads through an ephemeral consumer without acks, deleted at the end
// (or, if this process dies, by the server after a minute of inactivity).
func (s *Store) Scan(ctx context.Context, f Filter, fn func(*Letter) error) error {
	if err := f.check(); err != nil {
		return err
	}
	info, err := s.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("dlq: stream %s info: %w", jetstream.StreamDLQ, err)
	}
	last := info.State.LastSeq
	if f.UpTo > 0 {
		last = min(last, f.UpTo)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	cfg, ok := f.scanConsumer(last)
	if !ok {
		return nil
	}
	c, err := s.stream.CreateOrUpdateConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("dlq: scan %s: %w", jetstream.StreamDLQ, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.stream.DeleteConsumer(dctx, c.CachedInfo().Name)
	}()

	pending := c.CachedInfo().NumPending
	for pending > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := c.Fetch(int(min(pending, scanBatch)), js.FetchMaxWait(scanFetchWait))
		if err != nil {
			return fmt.Errorf("dlq: scan %s: %w", jetstream.StreamDLQ, err)
		}
		got, err := f.scanBatch(batch, last, &pending, fn)
		if err != nil {
			return err
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("dlq: scan %s: %w", jetstream.StreamDLQ, err)
		}
		if got == 0 {
			return fmt.Errorf("dlq: scan %s: no dead letters arrived within %s although %d are pending",
				jetstream.StreamDLQ, scanFetchWait, pending)
		}
	}
	return nil
}

// scanConsumer is the configuration of the ephemeral consumer a Scan of
// the dead letters f selects up to last reads through; false when f
// selects none.
func (f Filter) scanConsumer(last uint64) (js.ConsumerConfig, bool) {
	cfg := js.ConsumerConfig{
		Description:       "toolpool: dlq scan",
		FilterSubject:     f.subject(),
		DeliverPolicy:     js.DeliverAllPolicy,
		AckPolicy:         js.AckNonePolicy,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
	}
	switch {
	case f.After > 0:
		if f.After >= last {
			return cfg, false
		}
		cfg.DeliverPolicy, cfg.OptStartSeq = js.DeliverByStartSequencePolicy, f.After+1
	case !f.Since.IsZero():
		since := f.Since
		cfg.DeliverPolicy, cfg.OptStartTime = js.DeliverByStartTimePolicy, &since
	}
	return cfg, true
}

// scanBatch calls fn for each dead letter of batch f selects, up to last,
// and keeps pending to the consumer's count of letters still to come (0
// past last). It returns how many messages the batch brought, and fn's
// error.
func (f Filter) scanBatch(batch js.MessageBatch, last uint64, pending *uint64, fn func(*Letter) error) (int, error) {
	got := 0
	for m := range batch.Messages() {
		got++
		meta, err := m.Metadata()
		if err != nil {
			return got, fmt.Errorf("dlq: scan %s: %w", jetstream.StreamDLQ, err)
		}
		*pending = meta.NumPending
		seq := meta.Sequence.Stream
		if seq > last {
			*pending = 0
			continue
		}
		if !f.prematches(m.Headers(), m.Data()) {
			continue
		}
		l := newLetter(seq, m.Subject(), meta.Timestamp, m.Headers(), m.Data())
		if !f.matches(l) {
			continue
		}
		if err := fn(l); err != nil {
			return got, err
		}
	}
	return got, nil
}

// List returns the dead letters f selects, oldest first (see Scan).
func (s *Store) List(ctx context.Context, f Filter) ([]*Letter, error) {
	var out []*Letter
	err := s.Scan(ctx, f, func(l *Letter) error {
		out = append(out, l)
		return nil
	})
	return out, err
}

// Get returns the dead letter at seq; an error matching ErrNotFound when
// there is none.
func (s *Store) Get(ctx context.Context, seq uint64) (*Letter, error) {
	m, err := s.stream.GetMsg(ctx, seq)
	if errors.Is(err, js.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w: %d", ErrNotFound, seq)
	}
	if err != nil {
		return nil, fmt.Errorf("dlq: get dead letter %d: %w", seq, err)
	}
	return newLetter(m.Sequence, m.Subject, m.Time, m.Header, m.Data), nil
}

// Delete removes the dead letter at seq; an error matching ErrNotFound
// when there is none.
func (s *Store) Delete(ctx context.Context, seq uint64) error {
	return deleteMsg(ctx, s.stream, seq)
}

// Purge deletes every dead letter f selects and returns how many it
// deleted. Letters stored after Purge began are kept. A filter on the tool
// and UpTo alone (or none) purges on the server in one request; a filter
// on anything else deletes letter by letter.
func (s *Store) Purge(ctx context.Context, f Filter) (int, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	if f.readsBodies() {
		seqs, err := s.Seqs(ctx, f)
		if err != nil {
			return 0, err
		}
		return s.DeleteSeqs(ctx, seqs)
	}
	before, last, err := s.count(ctx, f.subject())
	if err != nil || before == 0 {
		return 0, err
	}
	if f.UpTo > 0 {
		last = min(last, f.UpTo)
	}
	// Up to the last sequence seen, nothing newer.
	err = s.stream.Purge(ctx, js.WithPurgeSubject(f.subject()), js.WithPurgeSequence(last+1))
	if err != nil {
		return 0, fmt.Errorf("dlq: purge %s: %w", jetstream.StreamDLQ, err)
	}
	after, _, err := s.count(ctx, f.subject())
	if err != nil {
		return 0, err
	}
	return int(before - min(after, before)), nil
}

// count returns how many messages subject holds and the stream's last
// sequence.
func (s *Store) count(ctx context.Context, subject string) (uint64, uint64, error) {
	info, err := s.stream.Info(ctx, js.WithSubjectFilter(subject))
	if err != nil {
		return 0, 0, fmt.Errorf("dlq: stream %s info: %w", jetstream.StreamDLQ, err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, info.State.LastSeq, nil
}

// Counts returns the number of dead letters per tool.
func (s *Store) Counts(ctx context.Context) (map[string]uint64, error) {
	return Counts(ctx, s.stream)
}

// Counts returns the number of dead letters per tool in stream, which must
// be TOOL_DLQ.
func Counts(ctx context.Context, stream js.Stream) (map[string]uint64, error) {
	info, err := stream.Info(ctx, js.WithSubjectFilter(jetstream.DLQSubjectPrefix+">"))
	if err != nil {
		return nil, fmt.Errorf("dlq: stream %s info: %w", jetstream.StreamDLQ, err)
	}
	out := make(map[string]uint64, len(info.State.Subjects))
	for subj, n := range info.State.Subjects {
		out[strings.TrimPrefix(subj, jetstream.DLQSubjectPrefix)] += n
	}
	return out, nil
}

// deleteMsg deletes seq from stream; an error matching ErrNotFound when it
// is not there. The server's refusal does not say why in a form the client
// keeps (only as text), so a refused delete is checked with a get.
func deleteMsg(ctx context.Context, stream js.Stream, seq uint64) error {
	err := stream.DeleteMsg(ctx, seq)
	if err == nil {
		return nil
	}
	if errors.Is(err, js.ErrMsgNotFound) || errors.Is(err, js.ErrMsgDeleteUnsuccessful) {
		if _, gerr := stream.GetMsg(ctx, seq); errors.Is(gerr, js.ErrMsgNotFound) {
			return fmt.Errorf("%w: %d", ErrNotFound, seq)
		}
	}
	return fmt.Errorf("dlq: delete message %d of %s: %w", seq, stream.CachedInfo().Config.Name, err)
}
