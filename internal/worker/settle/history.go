package settle

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// Defaults of HistoryConfig.
const (
	// HistoryBucketDefault is the KV bucket holding the failed attempts of
	// calls still in play.
	HistoryBucketDefault = "toolpool_attempts"
	// HistoryTTLDefault is how long a call's attempts are kept after its
	// last failed attempt.
	HistoryTTLDefault = 24 * time.Hour
	// HistoryMaxAttemptsDefault caps the attempts kept per call; the oldest
	// beyond it are dropped.
	HistoryMaxAttemptsDefault = 128
	// HistoryReplicasDefault is the replicas of a bucket created here.
	HistoryReplicasDefault = 1
	// historyMaxMessage caps an attempt's message in the bucket.
	historyMaxMessage = 1 << 10
	// historyConflictRetries bounds the read-modify-write retries of Record.
	historyConflictRetries = 16
)

// HistoryConfig names the attempts bucket and, for a bucket that does not
// exist yet, how to create it. Zero fields take the defaults (WithDefaults);
// OpenHistory fills them and checks the rest.
type HistoryConfig struct {
	// Bucket is the KV bucket's name. Default HistoryBucketDefault.
	Bucket string
	// TTL is how long a call's attempts live after its last write: the
	// bucket's max age, fixed when the bucket is created (an existing
	// bucket keeps its own). Default HistoryTTLDefault (24h).
	TTL time.Duration
	// Replicas of a bucket created here (1, 3 or 5). Default
	// HistoryReplicasDefault (1).
	Replicas int
	// Storage of a bucket created here. Default file storage.
	Storage js.StorageType
	// MaxAttempts caps the attempts kept per call. Default
	// HistoryMaxAttemptsDefault (128).
	MaxAttempts int
}

// WithDefaults returns c with zero fields set to the defaults.
func (c HistoryConfig) WithDefaults() HistoryConfig {
	c.Bucket = cmp.Or(c.Bucket, HistoryBucketDefault)
	c.TTL = cmp.Or(c.TTL, HistoryTTLDefault)
	c.Replicas = cmp.Or(c.Replicas, HistoryReplicasDefault)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, HistoryMaxAttemptsDefault)
	return c
}

// validate names the first bad field of a config with its defaults.
func (c HistoryConfig) validate() error {
	switch {
	case c.TTL < time.Minute:
		return fmt.Errorf("dlq: HistoryConfig.TTL must be at least 1m, got %s", c.TTL)
	case c.Replicas != 1 && c.Replicas != 3 && c.Replicas != 5:
		return fmt.Errorf("dlq: HistoryConfig.Replicas must be 1, 3 or 5, got %d", c.Replicas)
	case c.MaxAttempts < 1:
		return fmt.Errorf("dlq: HistoryConfig.MaxAttempts must be at least 1, got %d", c.MaxAttempts)
	}
	return nil
}

// History keeps the failed attempts of each call in a JetStream KV bucket,
// one key per call key (see HistoryKey), so that a dead letter carries every
// attempt's error even when the attempts ran on different workers, and the
// start marker of an attempt of a tool that is not idempotent (see Begin).
// Otherwise only failed attempts are written; the bucket's max age removes a
// call's record one TTL after its last write. It is safe for concurrent use.
type History struct {
	kv  js.KeyValue
	ttl time.Duration
	max int
	// keyTTL: the bucket supports per-key TTLs (created with limit
	// markers), so start markers go away with their call's deadline
	// rather than after ttl.
	keyTTL bool
}

// historyValue is the value of one key.
type historyValue struct {
	CallID   string    `json:"call_id"`
	Attempts []Attempt `json:"attempts"`
	// Started is the attempt of a tool that is not idempotent that began
	// and has not reported an outcome yet (see History.Begin).
	Started *Started `json:"started,omitempty"`
}

// Started marks an attempt of a call that began executing: a delivery of
// the call's message (its stream sequence in TOOL_CALLS and its delivery
// number) on a worker.
type Started struct {
	Seq      uint64    `json:"seq"`
	N        int       `json:"n"`
	WorkerID string    `json:"worker_id,omitempty"`
	At       time.Time `json:"at"`
	// Token is unique to the delivery that wrote the marker. A NATS server
	// killed before it stored a delivery hands the same call out again
	// with the same Seq and N, so only the token tells that delivery from
	// the earlier one, which may still be running.
	Token string `json:"token,omitempty"`
}

// sameDelivery reports whether p is the marker of the delivery s: the same
// token or, for markers written without one, the same stream sequence and
// delivery count.
func (p *Started) sameDelivery(s Started) bool {
	if p.Token != "" || s.Token != "" {
		return p.Token == s.Token
	}
	return p.Seq == s.Seq && p.N == s.N
}

// startedMinTTL is the shortest life of a start marker, where the bucket
// supports per-key TTLs.
const startedMinTTL = time.Minute

// OpenHistory binds to the attempts bucket, creating it when it does not
// exist.
func OpenHistory(ctx context.Context, j js.JetStream, cfg HistoryConfig) (*History, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	kv, err := j.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, js.ErrBucketNotFound) {
		kv, err = j.CreateKeyValue(ctx, js.KeyValueConfig{
			Bucket:      cfg.Bucket,
			Description: "toolpool: failed and started attempts of calls, one key per call key",
			History:     1,
			TTL:         cfg.TTL,
			Storage:     cfg.Storage,
			Replicas:    cfg.Replicas,
			// Per-key TTLs for start markers.
			LimitMarkerTTL: time.Minute,
		})
		if errors.Is(err, js.ErrBucketExists) {
			kv, err = j.KeyValue(ctx, cfg.Bucket) // created meanwhile by another process
		}
	}
	if err != nil {
		return nil, fmt.Errorf("dlq: open attempts bucket %s: %w", cfg.Bucket, err)
	}
	ttl, keyTTL := cfg.TTL, false
	if st, err := kv.Status(ctx); err == nil {
		if st.TTL() > 0 {
			ttl = st.TTL()
		}
		keyTTL = st.LimitMarkerTTL() > 0
	}
	return &History{kv: kv, ttl: ttl, max: cfg.MaxAttempts, keyTTL: keyTTL}, nil
}

// TTL is how long the bucket keeps a call's attempts after its last write.
func (h *History) TTL() time.Duration { return h.ttl }

// HistoryKey is the bucket key of a call, given its call key
// (envelope.CallKey; those are bucket keys as they are) or, for older
// records, its id: the string itself when it consists of letters, digits,
// '-' and '_' only, else '=' followed by it in unpadded URL-safe base64.
// The two forms cannot collide.
func HistoryKey(callID string) string {
	plain := callID != ""
	for i := 0; i < len(callID) && plain; i++ {
		c := callID[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
	}
	if plain {
		return callID
	}
	return "=" + base64.RawURLEncoding.EncodeToString([]byte(callID))
}

// Record appends a to the attempts of the call callID (its call key) and
// returns them all, oldest first. It clears the call's start marker of the
// same attempt (see Begin): that attempt has reported. A cancelled attempt
// (a.Cancelled) keeps it: the tool, which is not idempotent, started and
// was cut short, so it may have taken effect, and a later message of the
// same call is answered as having an unknown outcome rather than run again. Attempts of one call
// are sequential, so concurrent writers are rare; a conflicting write is
// retried from a fresh read. Recording the same attempt twice (same N and
// start time) keeps one.
func (h *History) Record(ctx context.Context, callID string, a Attempt) ([]Attempt, error) {
	key := HistoryKey(callID)
	if len(a.Message) > historyMaxMessage {
		a.Message = strings.ToValidUTF8(a.Message[:historyMaxMessage], "")
	}
	for try := range historyConflictRetries {
		v, rev, err := h.load(ctx, key)
		if err != nil {
			return nil, err
		}
		if v.CallID == "" {
			v.CallID = callID
		}
		if v.Started != nil && v.Started.N == a.N && !a.Cancelled {
			v.Started = nil
		}
		if !hasAttempt(v.Attempts, a) {
			v.Attempts = append(v.Attempts, a)
			if n := len(v.Attempts); n > h.max {
				v.Attempts = v.Attempts[n-h.max:]
			}
		}
		data, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("dlq: encode attempts: %w", err)
		}
		if rev == 0 {
			_, err = h.kv.Create(ctx, key, data)
		} else {
			_, err = h.kv.Update(ctx, key, data, rev)
		}
		if err == nil {
			return v.Attempts, nil
		}
		if !errors.Is(err, js.ErrKeyExists) && !errors.Is(err, js.ErrKeyRevisionMismatch) {
			return nil, fmt.Errorf("dlq: record attempt %d of call %q: %w", a.N, callID, err)
		}
		// Another writer came first: read again and retry, after a short
		// random pause so racing writers spread out.
		wait := time.Duration(rand.Int64N(int64(min(time.Millisecond<<try, 50*time.Millisecond)))) + 1
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dlq: record attempt %d of call %q: %w", a.N, callID, ctx.Err())
		case <-time.After(wait):
		}
	}
	return nil, fmt.Errorf("dlq: record attempt %d of call %q: the record kept changing under us", a.N, callID)
}

// Begin records that attempt s of the call with key key starts executing,
// before a worker runs a tool that is not idempotent. When another attempt
// began earlier and never reported (its worker died mid-call or was stopped
// while running it), Begin records nothing and returns that attempt: the
// call may have taken effect, and must not start again. A marker of the same
// delivery (its token; s.Seq and s.N for a marker without one) does not
// count: it was written by an earlier try of this Begin whose answer was lost. until is the call's deadline:
// where the bucket supports per-key TTLs, a new marker lives until a while
// after it, else for the bucket's TTL.
func (h *History) Begin(ctx context.Context, key string, s Started, until time.Time) (*Started, error) {
	hk := HistoryKey(key)
	for try := range historyConflictRetries {
		v, rev, err := h.load(ctx, hk)
		if err != nil {
			return nil, err
		}
		if p := v.Started; p != nil && !p.sameDelivery(s) {
			return p, nil
		}
		v.Started = &s
		data, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("dlq: encode attempts: %w", err)
		}
		if rev == 0 {
			var opts []js.KVCreateOpt
			if h.keyTTL {
				opts = append(opts, js.KeyTTL(max(time.Until(until)+startedMinTTL, startedMinTTL)))
			}
			_, err = h.kv.Create(ctx, hk, data, opts...)
		} else {
			_, err = h.kv.Update(ctx, hk, data, rev)
		}
		if err == nil {
			return nil, nil
		}
		if !errors.Is(err, js.ErrKeyExists) && !errors.Is(err, js.ErrKeyRevisionMismatch) {
			return nil, fmt.Errorf("dlq: record the start of attempt %d of call %s: %w", s.N, key, err)
		}
		wait := time.Duration(rand.Int64N(int64(min(time.Millisecond<<try, 50*time.Millisecond)))) + 1
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dlq: record the start of attempt %d of call %s: %w", s.N, key, ctx.Err())
		case <-time.After(wait):
		}
	}
	return nil, fmt.Errorf("dlq: record the start of attempt %d of call %s: the record kept changing under us", s.N, key)
}

// StartedOf returns the start marker of the call with key key: an attempt
// that began and has not reported, or nil.
func (h *History) StartedOf(ctx context.Context, key string) (*Started, error) {
	v, _, err := h.load(ctx, HistoryKey(key))
	if err != nil {
		return nil, err
	}
	return v.Started, nil
}

// Load returns the recorded attempts of callID, oldest first; none (and no
// error) when nothing was recorded or the record expired.
func (h *History) Load(ctx context.Context, callID string) ([]Attempt, error) {
	v, _, err := h.load(ctx, HistoryKey(callID))
	if err != nil {
		return nil, err
	}
	return v.Attempts, nil
}

// Delete forgets the attempts of callID.
func (h *History) Delete(ctx context.Context, callID string) error {
	if err := h.kv.Purge(ctx, HistoryKey(callID)); err != nil {
		return fmt.Errorf("dlq: delete attempts of call %q: %w", callID, err)
	}
	return nil
}

// load reads a key: its value and revision, revision 0 when it is absent.
func (h *History) load(ctx context.Context, key string) (historyValue, uint64, error) {
	var v historyValue
	e, err := h.kv.Get(ctx, key)
	if errors.Is(err, js.ErrKeyNotFound) {
		return v, 0, nil
	}
	if err != nil {
		return v, 0, fmt.Errorf("dlq: read attempts %s: %w", key, err)
	}
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		// A value we cannot read is overwritten rather than blocking the
		// record forever.
		return historyValue{}, e.Revision(), nil
	}
	return v, e.Revision(), nil
}

func hasAttempt(as []Attempt, a Attempt) bool {
	for _, b := range as {
		if b.N == a.N && b.Started.Equal(a.Started) {
			return true
		}
	}
	return false
}
