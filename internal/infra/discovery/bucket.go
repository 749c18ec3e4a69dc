package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	natssubject "github.com/toolpool/toolpool/internal/infra/subject"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Defaults of BucketConfig.
const (
	// BucketDefault is the KV bucket the live tools are announced in.
	BucketDefault = "toolpool_tools"
	// TTLDefault is how long an announcement lives unless its worker
	// refreshes it; workers refresh every TTL/3.
	TTLDefault = 30 * time.Second
	// TTLMin is the shortest TTL accepted.
	TTLMin = time.Second
)

// BucketConfig names the KV bucket of the live tools and, for a bucket that
// does not exist yet, how to create it. Zero fields take the defaults.
type BucketConfig struct {
	// Bucket is the bucket's name. Default BucketDefault.
	Bucket string
	// TTL is how long an announcement lives without a refresh. It is the
	// bucket's max age, fixed when the bucket is created: an existing
	// bucket keeps its own, and everyone uses that. At least TTLMin.
	// Default TTLDefault.
	TTL time.Duration
	// Replicas of a bucket created here (1, 3 or 5). Default 1.
	Replicas int
	// Storage of a bucket created here. Default file storage, so the
	// bucket outlives a server restart (its announcements expire by age).
	Storage js.StorageType
}

// withDefaults fills zero fields.
func (c BucketConfig) withDefaults() BucketConfig {
	if c.Bucket == "" {
		c.Bucket = BucketDefault
	}
	if c.TTL == 0 {
		c.TTL = TTLDefault
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	return c
}

func (c BucketConfig) validate() error {
	switch {
	case c.TTL < TTLMin:
		return fmt.Errorf("discovery: TTL must be at least %s, got %s", TTLMin, c.TTL)
	case c.Replicas != 1 && c.Replicas != 3 && c.Replicas != 5:
		return fmt.Errorf("discovery: Replicas must be 1, 3 or 5, got %d", c.Replicas)
	}
	return nil
}

// OpenBucket binds to the live-tools bucket, creating it when it does not
// exist. It returns the bucket and the TTL in force (the existing bucket's
// max age, which wins over cfg.TTL).
//
// A created bucket keeps a marker for a key that expires (LimitMarkerTTL),
// so that watchers learn of it at once; on a server too old for markers
// (before 2.11) it is created without them and readers expire
// announcements by their own clock.
func OpenBucket(ctx context.Context, j js.JetStream, cfg BucketConfig) (js.KeyValue, time.Duration, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, 0, err
	}
	kv, err := j.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, js.ErrBucketNotFound) {
		kvCfg := js.KeyValueConfig{
			Bucket:         cfg.Bucket,
			Description:    "toolpool: live tools, one key <tool>.<worker> per worker serving the tool",
			History:        1,
			TTL:            cfg.TTL,
			Storage:        cfg.Storage,
			Replicas:       cfg.Replicas,
			LimitMarkerTTL: cfg.TTL,
		}
		kv, err = j.CreateKeyValue(ctx, kvCfg)
		if errors.Is(err, js.ErrLimitMarkerTTLNotSupported) {
			kvCfg.LimitMarkerTTL = 0
			kv, err = j.CreateKeyValue(ctx, kvCfg)
		}
		if errors.Is(err, js.ErrBucketExists) {
			kv, err = j.KeyValue(ctx, cfg.Bucket) // created meanwhile by another process
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("discovery: open bucket %s: %w", cfg.Bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("discovery: bucket %s status: %w", cfg.Bucket, err)
	}
	ttl := st.TTL()
	if ttl <= 0 {
		// A bucket without max age (made by hand): announcements would never
		// expire there. Refresh as if it had the TTL asked for; readers
		// expire by their own clock.
		ttl = cfg.TTL
	}
	return kv, ttl, nil
}

// Announcement is the value of one key of the bucket: one worker serving
// one tool.
type Announcement struct {
	// Tool is the tool's definition, as the model sees it.
	Tool tools.Definition `json:"tool"`
	// WorkerID is the announcing worker's id (as in its results).
	WorkerID string `json:"worker_id"`
	// Timeout is the tool's per-attempt timeout on this worker.
	Timeout time.Duration `json:"timeout_ns"`
	// MaxAttempts is the tool's retry policy's max attempts on this worker.
	MaxAttempts int `json:"max_attempts"`
	// Concurrency is the tool's fleet-wide cap as this worker sees it.
	Concurrency int `json:"concurrency,omitempty"`
	// Version is the announcing binary's build (BuildVersion); empty from
	// workers before it was announced.
	Version string `json:"version,omitempty"`
	// Slots is how many calls the announcing worker runs at once, over
	// all its tools (worker.Config.Concurrency); 0 from workers before
	// fair shares.
	Slots int `json:"slots,omitempty"`
	// Fairness and PerKey are the tool's fairness key and per-key limits
	// (tools.Tool's).
	Fairness string           `json:"fairness,omitempty"`
	PerKey   *tools.KeyLimits `json:"per_key,omitempty"`
	// Idempotent says the tool is safe to execute twice (tools.Tool's
	// Idempotent): an MCP front door tells hosts so (idempotentHint).
	Idempotent bool `json:"idempotent,omitempty"`
	// Hints are tools.Tool's Hints: the MCP front door's other annotations.
	Hints *tools.Hints `json:"hints,omitempty"`
	// Cost, Cache and Approval are tools.Tool's: what one call spends of
	// a budget counted in cost units (0: 1), its result cache and its
	// approval rule (nil: none). The orchestrators' policy gate applies
	// them (see Catalog.Lookup).
	Cost     int                 `json:"cost,omitempty"`
	Cache    *tools.CachePolicy  `json:"cache,omitempty"`
	Approval *tools.ApprovalRule `json:"approval,omitempty"`
	// StartedAt is when the worker started announcing.
	StartedAt time.Time `json:"started_at"`
	// Liveness is the subject the worker subscribes to on its NATS
	// connection while it runs (LivenessPrefix and a random token), so
	// that a catalog can tell a worker whose connection is gone (killed,
	// or cut off) long before its announcement expires. Empty: the worker
	// has none, and only the TTL tells.
	Liveness string `json:"liveness,omitempty"`
}

// LivenessPrefix begins every liveness subject. Workers subscribe to their
// own (permission: subscribe "toolpool.alive.>"), catalogs publish empty
// requests to it (permission: publish "toolpool.alive.>") and only look
// for the server's "no responders" answer; nothing is sent back.
const LivenessPrefix = "toolpool.alive."

// validLiveness reports whether subject is a liveness subject a catalog
// may publish to: LivenessPrefix and one token of letters, digits, '-' or
// '_'. An announcement is message data; anything else is ignored.
func validLiveness(subject string) bool {
	token, ok := strings.CutPrefix(subject, LivenessPrefix)
	return ok && natssubject.ValidToken(token)
}

// AnnouncementOf describes a registered tool served by workerID. Its
// Slots are left 0: the Announcer sets them (AnnouncerConfig.Slots).
func AnnouncementOf(rt *tools.Registered, workerID string, startedAt time.Time) Announcement {
	a := Announcement{
		Tool:        rt.Definition(),
		WorkerID:    workerID,
		Version:     BuildVersion(),
		Timeout:     rt.Timeout,
		MaxAttempts: rt.Retry.MaxAttempts,
		Concurrency: rt.Concurrency,
		Fairness:    rt.Fairness,
		Idempotent:  rt.Idempotent,
		Hints:       hintsOf(rt.Hints),
		StartedAt:   startedAt,
	}
	if !rt.PerKey.IsZero() {
		limits := rt.PerKey
		a.PerKey = &limits
	}
	a.Cost = rt.Cost
	if rt.Cache != nil {
		c := *rt.Cache
		a.Cache = &c
	}
	if rt.Approval != nil {
		r := *rt.Approval
		r.When = slices.Clone(r.When)
		a.Approval = &r
	}
	return a
}

// Key is the bucket key of tool served by workerID: "<tool>.<worker>", the
// worker id reduced to the characters a key allows (others become '_').
func Key(tool, workerID string) string {
	return tool + "." + keySafe(workerID)
}

// keySafe maps s onto the characters of a KV key token: letters, digits,
// '-', '_' and '='; everything else becomes '_'.
func keySafe(s string) string {
	if s == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '=':
			return r
		}
		return '_'
	}, s)
}

// splitKey returns the tool of a key: the part before the first dot (tool
// names have none).
func splitKey(key string) (tool string, ok bool) {
	tool, _, ok = strings.Cut(key, ".")
	return tool, ok && tool != ""
}

func decodeAnnouncement(data []byte) (Announcement, error) {
	var a Announcement
	if err := json.Unmarshal(data, &a); err != nil {
		return Announcement{}, err
	}
	if a.Tool.Name == "" {
		return Announcement{}, errors.New("announcement without a tool name")
	}
	return a, nil
}

// hintsOf is h when any hint is known, nil otherwise (announcements stay
// as they were for tools without hints).
func hintsOf(h tools.Hints) *tools.Hints {
	if h == (tools.Hints{}) {
		return nil
	}
	return &h
}
