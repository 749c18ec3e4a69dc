package rescache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/startstop"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Defaults and limits of Config and Put.
const (
	// BucketDefault is the KV bucket of the cache.
	BucketDefault = "toolpool_cache"
	// MaxBytesDefault caps the bucket: when it is full, the oldest
	// entries make room for new ones.
	MaxBytesDefault = 1 << 30
	// TTLMin is the shortest TTL JetStream keeps a message for; a Put's
	// ttl is rounded up to whole seconds.
	TTLMin = time.Second
	// TTLMax is the longest TTL a Put accepts (the catalog's limit), and
	// the bucket's age limit.
	TTLMax = 7 * 24 * time.Hour
)

// ErrNotCacheable is the error of a Put refused before any round trip: a
// nil or is_error result, a ttl out of range, a malformed key, a result
// too large for the server.
var ErrNotCacheable = errors.New("rescache: not cacheable")

// ErrNotRunning is the error of a Get or Put before Start or after Stop.
var ErrNotRunning = errors.New("rescache: the store is not running")

// Config configures a Store.
type Config struct {
	// JS is the JetStream context. Required.
	JS js.JetStream
	// Bucket is the KV bucket. Default BucketDefault.
	Bucket string
	// MaxBytes caps the bucket's size. Default MaxBytesDefault.
	MaxBytes int64
	// Storage and Replicas of the bucket. Default file storage, 1
	// replica.
	Storage  js.StorageType
	Replicas int
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Metrics; nil records nothing.
	Metrics Metrics
	// Now is the clock; nil means time.Now. Only a server without
	// per-message TTLs needs it (Get then checks an entry's age itself).
	Now func() time.Time
}

// withDefaults returns c with the defaults applied.
func (c Config) withDefaults() Config {
	c.Bucket = cmp.Or(c.Bucket, BucketDefault)
	c.MaxBytes = cmp.Or(c.MaxBytes, MaxBytesDefault)
	c.Replicas = cmp.Or(c.Replicas, 1)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// validate names the first bad field.
func (c Config) validate() error {
	switch {
	case c.JS == nil:
		return errors.New("rescache: Config.JS is required")
	case !validBucket(c.Bucket):
		return fmt.Errorf("rescache: Config.Bucket %q: want letters, digits, - and _", c.Bucket)
	case c.MaxBytes < 1<<20:
		return fmt.Errorf("rescache: Config.MaxBytes is %d; want at least 1 MiB", c.MaxBytes)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("rescache: Config.Replicas is %d; want 1 to 5", c.Replicas)
	}
	return nil
}

// validBucket reports whether b is a valid bucket name.
func validBucket(b string) bool {
	if b == "" || len(b) > 64 {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Store is one orchestrator's handle on the shared result cache. It is
// safe for concurrent use; every replica's Store sees the same entries.
type Store struct {
	base startstop.Base
	cfg  Config
	log  *slog.Logger

	// Set by Start, read-only after.
	stream    js.Stream
	prefix    string // "$KV.<bucket>."
	maxValue  int    // the largest value the server takes
	serverTTL bool   // the server removes entries at their TTL

	claims sync.Map // key → the sequence of this Store's claim on it
	// usable is set once Start bound the bucket, cleared by Stop: Key
	// reads it, so that a cache that could not start caches nothing.
	usable atomic.Bool
}

var _ policy.Cache = (*Store)(nil)

// New returns a Store for cfg. It does no I/O: Start binds the bucket.
func New(cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, log: cfg.Logger, prefix: "$KV." + cfg.Bucket + "."}, nil
}

// valueHeadroom is what the largest value leaves of the server's maximum
// message size for the subject and headers.
const valueHeadroom = 1 << 10

// Start creates the bucket, or brings an existing one to this
// configuration (every replica does the same, so it is idempotent). A
// bucket whose configuration cannot be changed (another storage type) is
// used as it is, with a warning.
func (s *Store) Start(ctx context.Context) error {
	return s.base.Start(ctx, func(context.Context) error {
		cfg := s.streamConfig()
		if old, err := s.cfg.JS.Stream(ctx, cfg.Name); err == nil {
			// Its replicas stay as they are: scaling a stream in use is the
			// operator's call (nats stream edit), not a side effect of a
			// replica started with another setting.
			cfg.Replicas = old.CachedInfo().Config.Replicas
		}
		st, err := s.cfg.JS.CreateOrUpdateStream(ctx, cfg)
		if err != nil {
			var found error
			if st, found = s.cfg.JS.Stream(ctx, "KV_"+s.cfg.Bucket); found != nil {
				return fmt.Errorf("rescache: create bucket %s: %w", s.cfg.Bucket, err)
			}
			s.log.Warn("the result cache's bucket keeps its own configuration",
				slog.String("bucket", s.cfg.Bucket), slog.Any("error", err))
		}
		info := st.CachedInfo()
		s.stream = st
		s.serverTTL = info.Config.AllowMsgTTL
		if !s.serverTTL {
			s.log.Warn("the server does not remove result cache entries at their TTL (nats-server 2.11 or later does): expired entries are ignored, and removed after the bucket's age limit",
				slog.String("bucket", s.cfg.Bucket), slog.Duration("age_limit", info.Config.MaxAge))
		}
		s.maxValue = int(s.cfg.JS.Conn().MaxPayload()) - valueHeadroom
		s.usable.Store(true)
		return nil
	})
}

// streamConfig is the bucket's stream: a KV bucket (one message per key,
// direct gets) that takes per-message TTLs and, when full, drops its
// oldest entries rather than refuse new ones.
func (s *Store) streamConfig() js.StreamConfig {
	return js.StreamConfig{
		Name:              "KV_" + s.cfg.Bucket,
		Description:       "toolpool: the result cache: <key> a tool's successful result, kept for the tool's cache TTL",
		Subjects:          []string{s.prefix + ">"},
		MaxMsgsPerSubject: 1,
		MaxBytes:          s.cfg.MaxBytes,
		MaxAge:            TTLMax,
		MaxMsgSize:        -1,
		MaxMsgs:           -1,
		MaxConsumers:      -1,
		Storage:           s.cfg.Storage,
		Replicas:          s.cfg.Replicas,
		AllowRollup:       true,
		DenyDelete:        true,
		Duplicates:        2 * time.Minute,
		AllowDirect:       true,
		Discard:           js.DiscardOld,
		AllowMsgTTL:       true,
	}
}

// Stop ends the store: Get and Put fail with ErrNotRunning.
func (s *Store) Stop(ctx context.Context) error {
	s.usable.Store(false)
	return s.base.Stop(ctx, ErrNotRunning, nil)
}

// Get returns the result stored under key, if one is there and not
// expired: one direct get. A key of the wrong form is a miss.
func (s *Store) Get(ctx context.Context, key string) (envelope.Result, bool, error) {
	if !s.base.Running() {
		return envelope.Result{}, false, ErrNotRunning
	}
	if !validKey(key) {
		return envelope.Result{}, false, nil
	}
	start := time.Now()
	res, ok, err := s.get(ctx, key)
	if err != nil {
		s.failed("get")
	} else if s.cfg.Metrics != nil {
		s.cfg.Metrics.Lookup(time.Since(start), ok)
	}
	return res, ok, err
}

// get is Get without the checks and the metrics.
func (s *Store) get(ctx context.Context, key string) (envelope.Result, bool, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, s.prefix+key)
	if errors.Is(err, js.ErrMsgNotFound) {
		return envelope.Result{}, false, nil
	}
	if err != nil {
		return envelope.Result{}, false, fmt.Errorf("rescache: read %s: %w", key, err)
	}
	if len(m.Data) == 0 || m.Header.Get(js.MarkerReasonHeader) != "" || m.Header.Get("KV-Operation") != "" {
		return envelope.Result{}, false, nil // a marker or a delete
	}
	if !s.serverTTL && s.expired(m) {
		return envelope.Result{}, false, nil
	}
	res, err := envelope.DecodeResult(m.Data)
	if err != nil {
		return envelope.Result{}, false, fmt.Errorf("rescache: entry %s cannot be read: %w", key, err)
	}
	if res.IsError {
		return envelope.Result{}, false, nil // never written by Put
	}
	return *res, true, nil
}

// expired reports whether m is past the TTL it was written with, by this
// process's clock: on a server that does not remove it itself.
func (s *Store) expired(m *js.RawStreamMsg) bool {
	ttl, ok := msgTTL(m)
	if !ok {
		return false // written by someone else: the bucket's age limit applies
	}
	return !s.cfg.Now().Before(m.Time.Add(ttl))
}

// msgTTL is the TTL m was written with (a duration, or whole seconds, as
// the server takes them).
func msgTTL(m *js.RawStreamMsg) (time.Duration, bool) {
	h := m.Header.Get(js.MsgTTLHeader)
	if ttl, err := time.ParseDuration(h); err == nil {
		return ttl, true
	}
	secs, err := strconv.ParseInt(h, 10, 64)
	if err != nil || secs < 0 {
		return 0, false
	}
	return time.Duration(secs) * time.Second, true
}

// Put stores res, a successful result, under key for ttl (rounded up to
// whole seconds, at least TTLMin), replacing what key held: one publish.
// The stored copy has no call key (Result.Key): it answers other calls;
// the gate gives each its own call id.
// A nil or is_error result, a ttl out of range, a malformed key or a
// result too large for the server is refused with ErrNotCacheable.
func (s *Store) Put(ctx context.Context, key string, res *envelope.Result, ttl time.Duration) error {
	if !s.base.Running() {
		return ErrNotRunning
	}
	switch {
	case res == nil:
		return fmt.Errorf("%w: no result", ErrNotCacheable)
	case res.IsError:
		return fmt.Errorf("%w: an is_error result is never cached", ErrNotCacheable)
	case !validKey(key):
		return fmt.Errorf("%w: the key %s is not a cache key", ErrNotCacheable, quote(key))
	case ttl <= 0 || ttl > TTLMax:
		return fmt.Errorf("%w: the ttl %v is outside 1s..%v", ErrNotCacheable, ttl, TTLMax)
	}
	ttl = wholeSeconds(ttl)
	r := *res  // EncodeResult sets V: the caller's result may be read meanwhile
	r.Key = "" // it will answer other calls than the one whose key it has
	data, err := envelope.EncodeResult(&r)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotCacheable, err)
	}
	if len(data) > s.maxValue {
		return fmt.Errorf("%w: the result is %d bytes, over the server's limit of %d", ErrNotCacheable, len(data), s.maxValue)
	}
	msg := &nats.Msg{Subject: s.prefix + key, Data: data}
	if _, err := s.cfg.JS.PublishMsg(ctx, msg, js.WithMsgTTL(ttl)); err != nil {
		s.failed("put")
		return fmt.Errorf("rescache: store %s: %w", key, err)
	}
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Stored(res.Tool, len(data))
	}
	return nil
}
