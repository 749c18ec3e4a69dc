package jetstream_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/tools"
)

var update = flag.Bool("update", false, "rewrite streams/*.json from StreamConfigs")

func TestNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{jetstream.CallSubject("web_search"), "tools.call.web_search"},
		{jetstream.ResultSubject("orch-1", "abcd"), "tools.result.orch-1.abcd"},
		{jetstream.ResultFilter("orch-1"), "tools.result.orch-1.>"},
		{jetstream.ResultKeySubject("abcd"), "tools.result.*.abcd"},
		{jetstream.DLQSubject("web_search"), "tools.dlq.web_search"},
		{jetstream.ConsumerName("web_search"), "tool_web_search"},
		{jetstream.MaxDeliveriesAdvisorySubject("echo"), "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.TOOL_CALLS.tool_echo"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestConfigWithDefaults(t *testing.T) {
	t.Parallel()
	got := jetstream.Config{}.WithDefaults()
	want := jetstream.Config{
		Replicas:        1,
		Storage:         js.FileStorage,
		MaxMsgSize:      2 << 20,
		DuplicateWindow: 2 * time.Minute,
		ResultsMaxAge:   time.Hour,
		DLQMaxAge:       30 * 24 * time.Hour,
		DLQMaxBytes:     1 << 30,
	}
	if got != want {
		t.Errorf("Config{}.WithDefaults() = %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	set := jetstream.Config{
		Replicas: 3, Storage: js.MemoryStorage, MaxMsgSize: 1 << 20, DuplicateWindow: 5 * time.Minute,
		ResultsMaxAge: 2 * time.Hour, DLQMaxAge: time.Hour, DLQMaxBytes: -1, CallsMaxAge: time.Hour, CallsMaxBytes: 1 << 20,
	}
	if got := set.WithDefaults(); got != set {
		t.Errorf("WithDefaults changed set fields: %+v, want %+v", got, set)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		modify func(*jetstream.Config)
		field  string // "" means valid
	}{
		{"defaults", func(*jetstream.Config) {}, ""},
		{"three replicas", func(c *jetstream.Config) { c.Replicas = 3 }, ""},
		{"five replicas", func(c *jetstream.Config) { c.Replicas = 5 }, ""},
		{"memory", func(c *jetstream.Config) { c.Storage = js.MemoryStorage }, ""},
		{"no DLQ cap", func(c *jetstream.Config) { c.DLQMaxBytes = -1 }, ""},
		{"calls limits", func(c *jetstream.Config) { c.CallsMaxAge = time.Hour; c.CallsMaxBytes = 1 << 30 }, ""},
		{"two replicas", func(c *jetstream.Config) { c.Replicas = 2 }, "Config.Replicas"},
		{"seven replicas", func(c *jetstream.Config) { c.Replicas = 7 }, "Config.Replicas"},
		{"negative replicas", func(c *jetstream.Config) { c.Replicas = -1 }, "Config.Replicas"},
		{"unknown storage", func(c *jetstream.Config) { c.Storage = 7 }, "Config.Storage"},
		{"negative msg size", func(c *jetstream.Config) { c.MaxMsgSize = -1 }, "Config.MaxMsgSize"},
		{"huge msg size", func(c *jetstream.Config) { c.MaxMsgSize = 64 << 20 }, "Config.MaxMsgSize"},
		{"short dedup window", func(c *jetstream.Config) { c.DuplicateWindow = time.Minute }, "Config.DuplicateWindow"},
		{"results age below window", func(c *jetstream.Config) { c.ResultsMaxAge = time.Minute }, "Config.ResultsMaxAge"},
		{"DLQ age below window", func(c *jetstream.Config) { c.DLQMaxAge = time.Minute }, "Config.DLQMaxAge"},
		{"DLQ bytes negative", func(c *jetstream.Config) { c.DLQMaxBytes = -2 }, "Config.DLQMaxBytes"},
		{"calls age negative", func(c *jetstream.Config) { c.CallsMaxAge = -time.Second }, "Config.CallsMaxAge"},
		{"calls age below window", func(c *jetstream.Config) { c.CallsMaxAge = time.Minute }, "Config.CallsMaxAge"},
		{"calls bytes negative", func(c *jetstream.Config) { c.CallsMaxBytes = -1 }, "Config.CallsMaxBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := jetstream.Config{}.WithDefaults()
			tc.modify(&cfg)
			err := cfg.Validate()
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.field != "" && err == nil:
				t.Fatalf("Validate() = nil, want an error naming %s", tc.field)
			case tc.field != "" && !strings.Contains(err.Error(), tc.field):
				t.Fatalf("Validate() = %q, want it to name %s", err, tc.field)
			}
		})
	}
}

func TestStreamConfigs(t *testing.T) {
	t.Parallel()
	cfgs := jetstream.StreamConfigs(jetstream.Config{CallsMaxBytes: 5 << 20, DLQMaxBytes: -1, Replicas: 3})
	if len(cfgs) != 3 {
		t.Fatalf("got %d stream configs, want 3", len(cfgs))
	}
	calls, results, dlq := cfgs[0], cfgs[1], cfgs[2]
	for _, tc := range []struct {
		what      string
		got, want any
	}{
		{"calls name", calls.Name, "TOOL_CALLS"},
		{"calls subjects", calls.Subjects, []string{"tools.call.>"}},
		{"calls retention", calls.Retention, js.WorkQueuePolicy},
		{"calls max age", calls.MaxAge, time.Duration(0)},
		{"calls max bytes", calls.MaxBytes, int64(5 << 20)},
		{"calls max msg size", calls.MaxMsgSize, int32(2 << 20)},
		{"calls discard", calls.Discard, js.DiscardNew},
		{"calls dedup", calls.Duplicates, 2 * time.Minute},
		{"calls storage", calls.Storage, js.FileStorage},
		{"calls replicas", calls.Replicas, 3},
		{"calls allow direct", calls.AllowDirect, true},
		{"results allow direct", results.AllowDirect, false},
		{"dlq allow direct", dlq.AllowDirect, false},
		{"results name", results.Name, "TOOL_RESULTS"},
		{"results subjects", results.Subjects, []string{"tools.result.>"}},
		{"results retention", results.Retention, js.LimitsPolicy},
		{"results max age", results.MaxAge, time.Hour},
		{"results max msg size", results.MaxMsgSize, int32(2 << 20)},
		{"results discard", results.Discard, js.DiscardOld},
		{"results dedup", results.Duplicates, 2 * time.Minute},
		{"results replicas", results.Replicas, 3},
		{"dlq name", dlq.Name, "TOOL_DLQ"},
		{"dlq subjects", dlq.Subjects, []string{"tools.dlq.>"}},
		{"dlq retention", dlq.Retention, js.LimitsPolicy},
		{"dlq max age", dlq.MaxAge, 30 * 24 * time.Hour},
		{"dlq max bytes", dlq.MaxBytes, int64(-1)},
		{"dlq discard", dlq.Discard, js.DiscardOld},
		{"dlq replicas", dlq.Replicas, 3},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.what, tc.got, tc.want)
		}
	}
	if got := jetstream.StreamConfigs(jetstream.Config{})[2].MaxBytes; got != 1<<30 {
		t.Errorf("default DLQ max bytes = %d, want 1 GiB", got)
	}
}

// TestStreamFiles checks that streams/*.json, the files operators give to
// `nats stream add --config`, are the default topology. Run with -update
// to rewrite them after changing StreamConfigs.
func TestStreamFiles(t *testing.T) {
	t.Parallel()
	for _, want := range jetstream.StreamConfigs(jetstream.Config{}.WithDefaults()) {
		path := filepath.Join("streams", want.Name+".json")
		if *update {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false) // keep "tools.call.>" readable
			enc.SetIndent("", "  ")
			if err := enc.Encode(want); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestStreamFiles -update to write it)", err)
		}
		var got js.StreamConfig
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !reflect.DeepEqual(got, want) {
			wantJSON, _ := json.MarshalIndent(want, "", "  ")
			t.Errorf("%s disagrees with StreamConfigs (run go test -run TestStreamFiles -update)\nfile: %s\ncode: %s", path, b, wantJSON)
		}
		// The settings that define the topology, checked by name so the
		// file cannot drift together with the code unnoticed.
		var raw map[string]any
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"name", "subjects", "retention", "storage", "num_replicas", "max_age", "duplicate_window", "discard", "max_bytes"} {
			if _, ok := raw[key]; !ok {
				t.Errorf("%s has no %q", path, key)
			}
		}
	}
}

func TestProvisionCreatesStreams(t *testing.T) {
	t.Parallel()
	_, _, j := natstest.StartProvisioned(t)
	ctx := testContext(t)
	for _, want := range jetstream.StreamConfigs(jetstream.Config{}) {
		s, err := j.Stream(ctx, want.Name)
		if err != nil {
			t.Fatalf("stream %s: %v", want.Name, err)
		}
		got := s.CachedInfo().Config
		if !reflect.DeepEqual(got.Subjects, want.Subjects) || got.Retention != want.Retention || got.Storage != want.Storage ||
			got.Replicas != want.Replicas || got.MaxAge != want.MaxAge || got.Duplicates != want.Duplicates ||
			got.MaxMsgSize != want.MaxMsgSize || got.MaxBytes != want.MaxBytes || got.Discard != want.Discard {
			t.Errorf("stream %s has config %+v, want %+v", want.Name, got, want)
		}
	}
}

func TestProvisionIsIdempotent(t *testing.T) {
	t.Parallel()
	_, _, j := natstest.StartProvisioned(t)
	ctx := testContext(t)
	before := streamInfos(t, j)
	for range 2 {
		if err := jetstream.Provision(ctx, j, jetstream.Config{}); err != nil {
			t.Fatalf("Provision again: %v", err)
		}
	}
	after := streamInfos(t, j)
	for name, b := range before {
		a := after[name]
		if !a.Created.Equal(b.Created) {
			t.Errorf("stream %s re-created: Created %v, was %v", name, a.Created, b.Created)
		}
		if !reflect.DeepEqual(a.Config, b.Config) {
			t.Errorf("stream %s config changed:\n%+v\nwas\n%+v", name, a.Config, b.Config)
		}
	}
}

func streamInfos(t *testing.T, j js.JetStream) map[string]*js.StreamInfo {
	t.Helper()
	infos := map[string]*js.StreamInfo{}
	for _, name := range []string{jetstream.StreamCalls, jetstream.StreamResults, jetstream.StreamDLQ} {
		s, err := j.Stream(testContext(t), name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		infos[name] = s.CachedInfo()
	}
	return infos
}

func TestProvisionConflicts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		existing js.StreamConfig
		cfg      jetstream.Config
		want     string
	}{
		{
			name:     "retention",
			existing: js.StreamConfig{Name: "TOOL_CALLS", Subjects: []string{"tools.call.>"}, Retention: js.LimitsPolicy},
			want:     "jetstream: stream TOOL_CALLS exists with retention=limits, want workqueue",
		},
		{
			name:     "subjects",
			existing: js.StreamConfig{Name: "TOOL_CALLS", Subjects: []string{"tools.call.>", "calls.>"}, Retention: js.WorkQueuePolicy},
			want:     "jetstream: stream TOOL_CALLS exists with subjects=[calls.> tools.call.>], want [tools.call.>]",
		},
		{
			name:     "storage and retention",
			existing: js.StreamConfig{Name: "TOOL_RESULTS", Subjects: []string{"tools.result.>"}, Retention: js.InterestPolicy, Storage: js.MemoryStorage},
			want:     "jetstream: stream TOOL_RESULTS exists with retention=interest, want limits; storage=memory, want file",
		},
		{
			name:     "replicas",
			existing: js.StreamConfig{Name: "TOOL_CALLS", Subjects: []string{"tools.call.>"}, Retention: js.WorkQueuePolicy, Duplicates: 2 * time.Minute},
			cfg:      jetstream.Config{Replicas: 3},
			want:     "jetstream: stream TOOL_CALLS exists with num_replicas=1, want 3",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := natstest.Start(t)
			j, err := js.New(natstest.Connect(t, srv.ClientURL()))
			if err != nil {
				t.Fatal(err)
			}
			ctx := testContext(t)
			created, err := j.CreateStream(ctx, tc.existing)
			if err != nil {
				t.Fatal(err)
			}
			err = jetstream.Provision(ctx, j, tc.cfg)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Provision() = %v, want %q", err, tc.want)
			}
			if !errors.Is(err, jetstream.ErrStreamConflict) {
				t.Errorf("errors.Is(err, ErrStreamConflict) = false for %v", err)
			}
			var ce *jetstream.ConflictError
			if !errors.As(err, &ce) || ce.Stream != tc.existing.Name || len(ce.Diffs) == 0 {
				t.Errorf("errors.As(err, *ConflictError) gave %+v", ce)
			}
			// The conflicting stream is left as it was.
			s, err := j.Stream(ctx, tc.existing.Name)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.CachedInfo().Config; !reflect.DeepEqual(got, created.CachedInfo().Config) {
				t.Errorf("conflicting stream was changed to %+v", got)
			}
		})
	}
}

func TestProvisionUpdatesLimitsInPlace(t *testing.T) {
	t.Parallel()
	_, _, j := natstest.StartProvisioned(t)
	ctx := testContext(t)

	// An operator's own setting, which Provision does not manage.
	s, err := j.Stream(ctx, jetstream.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	opCfg := s.CachedInfo().Config
	opCfg.Metadata = map[string]string{"owner": "ops"}
	if _, err := j.UpdateStream(ctx, opCfg); err != nil {
		t.Fatal(err)
	}
	before := streamInfos(t, j)

	cfg := jetstream.Config{
		MaxMsgSize:      1 << 20,
		DuplicateWindow: 5 * time.Minute,
		ResultsMaxAge:   2 * time.Hour,
		DLQMaxAge:       7 * 24 * time.Hour,
		DLQMaxBytes:     2 << 30,
		CallsMaxAge:     time.Hour,
		CallsMaxBytes:   100 << 20,
	}
	if err := jetstream.Provision(ctx, j, cfg); err != nil {
		t.Fatalf("Provision with new limits: %v", err)
	}
	after := streamInfos(t, j)
	for _, want := range jetstream.StreamConfigs(cfg) {
		got := after[want.Name]
		if !got.Created.Equal(before[want.Name].Created) {
			t.Errorf("stream %s was re-created", want.Name)
		}
		c := got.Config
		if c.MaxAge != want.MaxAge || c.MaxBytes != want.MaxBytes || c.MaxMsgSize != want.MaxMsgSize || c.Duplicates != want.Duplicates {
			t.Errorf("stream %s limits: max_age=%v max_bytes=%d max_msg_size=%d duplicate_window=%v, want %v %d %d %v",
				want.Name, c.MaxAge, c.MaxBytes, c.MaxMsgSize, c.Duplicates, want.MaxAge, want.MaxBytes, want.MaxMsgSize, want.Duplicates)
		}
	}
	if got := after[jetstream.StreamDLQ].Config.Metadata["owner"]; got != "ops" {
		t.Errorf("operator metadata lost: owner=%q", got)
	}
}

// TestProvisionAllowsDirectInPlace: a TOOL_CALLS made before direct gets
// were part of the topology (or by hand without them) gets them from the
// next Provision, without being re-created and keeping its calls; an
// operator's direct gets on another stream are left on.
func TestProvisionAllowsDirectInPlace(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	cfgs := jetstream.StreamConfigs(jetstream.Config{})
	cfgs[0].AllowDirect = false // the old TOOL_CALLS
	cfgs[2].AllowDirect = true  // an operator's choice on TOOL_DLQ
	for _, cfg := range cfgs {
		if _, err := j.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := j.Publish(ctx, jetstream.CallSubject("old"), []byte("queued before")); err != nil {
		t.Fatal(err)
	}
	before := streamInfos(t, j)
	if err := jetstream.Provision(ctx, j, jetstream.Config{}); err != nil {
		t.Fatalf("Provision over the old TOOL_CALLS: %v", err)
	}
	after := streamInfos(t, j)
	calls := after[jetstream.StreamCalls]
	if !calls.Config.AllowDirect {
		t.Error("TOOL_CALLS still has allow_direct off after Provision")
	}
	if !calls.Created.Equal(before[jetstream.StreamCalls].Created) || calls.State.Msgs != 1 {
		t.Errorf("TOOL_CALLS re-created or emptied: created %v (was %v), %d messages",
			calls.Created, before[jetstream.StreamCalls].Created, calls.State.Msgs)
	}
	if !after[jetstream.StreamDLQ].Config.AllowDirect {
		t.Error("Provision turned off the operator's allow_direct on TOOL_DLQ")
	}
	if after[jetstream.StreamResults].Config.AllowDirect {
		t.Error("Provision turned on allow_direct on TOOL_RESULTS")
	}
}

func TestProvisionRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	err = jetstream.Provision(ctx, j, jetstream.Config{Replicas: 2})
	if err == nil || !strings.Contains(err.Error(), "Config.Replicas") {
		t.Fatalf("Provision(Replicas: 2) = %v, want an error naming Config.Replicas", err)
	}
	if _, err := j.Stream(ctx, jetstream.StreamCalls); !errors.Is(err, js.ErrStreamNotFound) {
		t.Errorf("stream lookup after rejected Provision = %v, want ErrStreamNotFound", err)
	}
}

func TestStreamSemantics(t *testing.T) {
	t.Parallel()
	_, nc, j := natstest.StartProvisioned(t)
	ctx := testContext(t)

	t.Run("calls and results are deduplicated by message id", func(t *testing.T) {
		for _, subject := range []string{jetstream.CallSubject("echo"), jetstream.ResultSubject("orch-1", "abcd"), jetstream.DLQSubject("echo")} {
			first, err := j.Publish(ctx, subject, []byte("x"), js.WithMsgID("toolu_01"))
			if err != nil {
				t.Fatal(err)
			}
			second, err := j.Publish(ctx, subject, []byte("x"), js.WithMsgID("toolu_01"))
			if err != nil {
				t.Fatal(err)
			}
			if first.Duplicate || !second.Duplicate || second.Sequence != first.Sequence {
				t.Errorf("%s: first %+v, second %+v; want the second to be a duplicate of the first", subject, first, second)
			}
		}
	})

	t.Run("calls above MaxMsgSize are refused", func(t *testing.T) {
		big := make([]byte, jetstream.MaxMsgSizeDefault+1)
		if _, err := j.Publish(ctx, jetstream.CallSubject("echo"), big); err == nil {
			t.Error("publishing a call above MaxMsgSize succeeded")
		}
		ok := make([]byte, jetstream.MaxMsgSizeDefault-1024)
		if _, err := j.Publish(ctx, jetstream.CallSubject("echo"), ok); err != nil {
			t.Errorf("publishing a call just under MaxMsgSize: %v", err)
		}
	})

	t.Run("an acked call leaves the work queue", func(t *testing.T) {
		c, err := jetstream.EnsureConsumer(ctx, j, jetstream.ConsumerSpec{Tool: "wq"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Publish(ctx, jetstream.CallSubject("wq"), []byte("call")); err != nil {
			t.Fatal(err)
		}
		msgs, err := c.Fetch(1, js.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range msgs.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		s, err := j.Stream(ctx, jetstream.StreamCalls)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetLastMsgForSubject(ctx, jetstream.CallSubject("wq")); !errors.Is(err, js.ErrMsgNotFound) {
			t.Errorf("acked call still in TOOL_CALLS (lookup error %v)", err)
		}
	})

	t.Run("a call past MaxDeliver is announced", func(t *testing.T) {
		advisories, err := nc.SubscribeSync(jetstream.MaxDeliveriesAdvisorySubject("poison"))
		if err != nil {
			t.Fatal(err)
		}
		defer advisories.Unsubscribe()
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		c, err := jetstream.EnsureConsumer(ctx, j, jetstream.ConsumerSpec{Tool: "poison", MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Publish(ctx, jetstream.CallSubject("poison"), []byte("call")); err != nil {
			t.Fatal(err)
		}
		deliveries := 0
		for deliveries < 1+jetstream.MaxDeliverMargin {
			msgs, err := c.Fetch(1, js.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for m := range msgs.Messages() {
				deliveries++
				if err := m.Nak(); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The server notices when it would deliver the call again, that
		// is while a worker is pulling.
		msgs, err := c.Fetch(1, js.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for m := range msgs.Messages() {
			md, _ := m.Metadata()
			t.Errorf("call delivered again after MaxDeliver (delivery %d)", md.NumDelivered)
		}
		adv, err := advisories.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("no max-deliveries advisory after %d deliveries: %v", deliveries, err)
		}
		// The call stays in the work queue; the advisory says where, so
		// it can still be dead-lettered.
		var event struct {
			StreamSeq  uint64 `json:"stream_seq"`
			Deliveries uint64 `json:"deliveries"`
		}
		if err := json.Unmarshal(adv.Data, &event); err != nil {
			t.Fatal(err)
		}
		s, err := j.Stream(ctx, jetstream.StreamCalls)
		if err != nil {
			t.Fatal(err)
		}
		stranded, err := s.GetMsg(ctx, event.StreamSeq)
		if err != nil || string(stranded.Data) != "call" {
			t.Errorf("call at advisory's stream_seq %d: %v %v", event.StreamSeq, stranded, err)
		}
	})
}

func TestConsumerConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec           jetstream.ConsumerSpec
		ackWait        time.Duration
		maxDeliver     int
		maxAckPendings int
	}{
		// AckWait is the liveness window whatever the timeout: a 10-minute
		// tool's call held by a dead worker comes back as fast as echo's.
		{jetstream.ConsumerSpec{Tool: "echo"}, 20 * time.Second, 5, 1000},
		{jetstream.ConsumerSpec{Tool: "fast", Timeout: time.Second, MaxAttempts: 1, Concurrency: 4}, 20 * time.Second, 3, 4},
		{jetstream.ConsumerSpec{Tool: "edge", Timeout: 5 * time.Second, MaxAttempts: 5, Concurrency: 1}, 20 * time.Second, 7, 1},
		{jetstream.ConsumerSpec{Tool: "slow", Timeout: 10 * time.Minute, MaxAttempts: 10, Concurrency: 50}, 20 * time.Second, 12, 50},
		{jetstream.ConsumerSpec{Tool: "tuned", Timeout: 10 * time.Minute, AckWait: 5 * time.Second}, 5 * time.Second, 5, 1000},
	} {
		t.Run(tc.spec.Tool, func(t *testing.T) {
			t.Parallel()
			got := jetstream.ConsumerConfig(tc.spec)
			want := js.ConsumerConfig{
				Durable:       "tool_" + tc.spec.Tool,
				Description:   "toolpool: tool " + tc.spec.Tool,
				FilterSubject: "tools.call." + tc.spec.Tool,
				DeliverPolicy: js.DeliverAllPolicy,
				AckPolicy:     js.AckExplicitPolicy,
				AckWait:       tc.ackWait,
				MaxDeliver:    tc.maxDeliver,
				MaxAckPending: tc.maxAckPendings,
				ReplayPolicy:  js.ReplayInstantPolicy,
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ConsumerConfig(%+v) =\n%+v\nwant\n%+v", tc.spec, got, want)
			}
			if len(got.BackOff) != 0 {
				t.Errorf("BackOff = %v, want none (delays come from NakWithDelay)", got.BackOff)
			}
		})
	}
}

func TestHeartbeatFor(t *testing.T) {
	t.Parallel()
	if got := jetstream.HeartbeatFor(jetstream.AckWaitDefault); got != 5*time.Second {
		t.Errorf("HeartbeatFor(%v) = %v, want 5s", jetstream.AckWaitDefault, got)
	}
	// Redelivery after a crash must stay within the 30 s the design promises.
	if jetstream.AckWaitDefault > 30*time.Second {
		t.Errorf("AckWaitDefault %v is longer than the 30 s liveness target", jetstream.AckWaitDefault)
	}
}

func TestConsumerSpecValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec  jetstream.ConsumerSpec
		field string
	}{
		{jetstream.ConsumerSpec{Tool: "read_file"}, ""},
		{jetstream.ConsumerSpec{Tool: "a-B_9"}, ""},
		{jetstream.ConsumerSpec{Tool: strings.Repeat("x", 64)}, ""},
		{jetstream.ConsumerSpec{Tool: ""}, "ConsumerSpec.Tool"},
		{jetstream.ConsumerSpec{Tool: strings.Repeat("x", 65)}, "ConsumerSpec.Tool"},
		{jetstream.ConsumerSpec{Tool: "a.b"}, "ConsumerSpec.Tool"},
		{jetstream.ConsumerSpec{Tool: "a*"}, "ConsumerSpec.Tool"},
		{jetstream.ConsumerSpec{Tool: "a b"}, "ConsumerSpec.Tool"},
		{jetstream.ConsumerSpec{Tool: "t", Timeout: -time.Second}, "ConsumerSpec.Timeout"},
		{jetstream.ConsumerSpec{Tool: "t", MaxAttempts: -1}, "ConsumerSpec.MaxAttempts"},
		{jetstream.ConsumerSpec{Tool: "t", Concurrency: -1}, "ConsumerSpec.Concurrency"},
		{jetstream.ConsumerSpec{Tool: "t", AckWait: 100 * time.Millisecond}, "ConsumerSpec.AckWait"},
	} {
		err := tc.spec.WithDefaults().Validate()
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("Validate(%+v) = %v, want nil", tc.spec, err)
		case tc.field != "" && (err == nil || !strings.Contains(err.Error(), tc.field)):
			t.Errorf("Validate(%+v) = %v, want an error naming %s", tc.spec, err, tc.field)
		}
	}
}

func TestConsumerDefaultsMatchToolDefaults(t *testing.T) {
	t.Parallel()
	if jetstream.ConsumerTimeoutDefault != tools.TimeoutDefault {
		t.Errorf("ConsumerTimeoutDefault %v != tools.TimeoutDefault %v", jetstream.ConsumerTimeoutDefault, tools.TimeoutDefault)
	}
	if jetstream.ConsumerConcurrencyDefault != tools.ConcurrencyDefault {
		t.Errorf("ConsumerConcurrencyDefault %d != tools.ConcurrencyDefault %d", jetstream.ConsumerConcurrencyDefault, tools.ConcurrencyDefault)
	}
	if jetstream.ConsumerMaxAttemptsDefault != classify.MaxAttemptsDefault {
		t.Errorf("ConsumerMaxAttemptsDefault %d != classify.MaxAttemptsDefault %d", jetstream.ConsumerMaxAttemptsDefault, classify.MaxAttemptsDefault)
	}
}

func TestEnsureConsumer(t *testing.T) {
	t.Parallel()
	_, _, j := natstest.StartProvisioned(t)
	ctx := testContext(t)
	spec := jetstream.ConsumerSpec{Tool: "web_search", Timeout: 20 * time.Second, MaxAttempts: 4, Concurrency: 8}

	c, err := jetstream.EnsureConsumer(ctx, j, spec)
	if err != nil {
		t.Fatal(err)
	}
	info := c.CachedInfo()
	if info.Name != "tool_web_search" || info.Stream != "TOOL_CALLS" {
		t.Errorf("consumer %s on %s, want tool_web_search on TOOL_CALLS", info.Name, info.Stream)
	}
	got, want := info.Config, jetstream.ConsumerConfig(spec)
	if got.Durable != want.Durable || got.FilterSubject != want.FilterSubject || got.AckPolicy != js.AckExplicitPolicy ||
		got.AckWait != jetstream.AckWaitDefault || got.MaxDeliver != 6 || got.MaxAckPending != 8 || got.DeliverPolicy != js.DeliverAllPolicy ||
		got.Description != "toolpool: tool web_search" || len(got.BackOff) != 0 {
		t.Errorf("server-side consumer config %+v, want %+v", got, want)
	}

	again, err := jetstream.EnsureConsumer(ctx, j, spec)
	if err != nil {
		t.Fatalf("EnsureConsumer again: %v", err)
	}
	if !again.CachedInfo().Created.Equal(info.Created) {
		t.Error("EnsureConsumer re-created an unchanged consumer")
	}

	spec.Concurrency = 16
	updated, err := jetstream.EnsureConsumer(ctx, j, spec)
	if err != nil {
		t.Fatalf("EnsureConsumer with new concurrency: %v", err)
	}
	if got := updated.CachedInfo().Config.MaxAckPending; got != 16 {
		t.Errorf("MaxAckPending after update = %d, want 16", got)
	}
	if !updated.CachedInfo().Created.Equal(info.Created) {
		t.Error("EnsureConsumer re-created the consumer to update it")
	}
}

func TestEnsureConsumerErrors(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)

	_, err = jetstream.EnsureConsumer(ctx, j, jetstream.ConsumerSpec{Tool: "echo"})
	if !errors.Is(err, js.ErrStreamNotFound) || !strings.Contains(err.Error(), "provision") {
		t.Errorf("EnsureConsumer without streams = %v, want ErrStreamNotFound and a hint to provision", err)
	}
	_, err = jetstream.EnsureConsumer(ctx, j, jetstream.ConsumerSpec{Tool: "bad.name"})
	if err == nil || !strings.Contains(err.Error(), "ConsumerSpec.Tool") {
		t.Errorf("EnsureConsumer with bad tool name = %v, want an error naming ConsumerSpec.Tool", err)
	}
}

// Streams an operator created from streams/*.json are the topology:
// Provision accepts them and changes nothing.
func TestProvisionAcceptsStreamsFromFiles(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	for _, name := range []string{jetstream.StreamCalls, jetstream.StreamResults, jetstream.StreamDLQ} {
		b, err := os.ReadFile(filepath.Join("streams", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var cfg js.StreamConfig
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		if _, err := j.CreateStream(ctx, cfg); err != nil {
			t.Fatalf("create %s from its file: %v", name, err)
		}
	}
	before := streamInfos(t, j)
	if err := jetstream.Provision(ctx, j, jetstream.Config{}); err != nil {
		t.Fatalf("Provision over streams made from the files: %v", err)
	}
	after := streamInfos(t, j)
	for name, b := range before {
		if !reflect.DeepEqual(after[name].Config, b.Config) || !after[name].Created.Equal(b.Created) {
			t.Errorf("Provision changed stream %s made from its file:\n%+v\nwas\n%+v", name, after[name].Config, b.Config)
		}
	}
}

// Orchestrators and workers starting together all provision; none fails.
func TestProvisionConcurrently(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	ctx := testContext(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		j, err := js.New(natstest.Connect(t, srv.ClientURL()))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { errs <- jetstream.Provision(ctx, j, jetstream.Config{}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent Provision: %v", err)
		}
	}
}

// TestEnsureConsumerShortensOldAckWait: a consumer made by an earlier
// version, with AckWait = timeout + 5 s (11 min 5 s for a 10-minute tool),
// gets the liveness window in place, keeping its calls.
func TestEnsureConsumerShortensOldAckWait(t *testing.T) {
	t.Parallel()
	_, _, j := natstest.StartProvisioned(t)
	ctx := testContext(t)
	spec := jetstream.ConsumerSpec{Tool: "long_job", Timeout: 10 * time.Minute}
	old := jetstream.ConsumerConfig(spec)
	old.AckWait = spec.Timeout + 5*time.Second
	if _, err := j.CreateConsumer(ctx, jetstream.StreamCalls, old); err != nil {
		t.Fatal(err)
	}
	c, err := jetstream.EnsureConsumer(ctx, j, spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := natstest.CallConsumerInfo(t, j, "long_job").Config.AckWait; got != jetstream.AckWaitDefault {
		t.Errorf("AckWait after EnsureConsumer = %v, want %v", got, jetstream.AckWaitDefault)
	}
	if got := c.CachedInfo().Config.AckWait; got != jetstream.AckWaitDefault {
		t.Errorf("returned consumer's AckWait = %v, want %v", got, jetstream.AckWaitDefault)
	}
}
