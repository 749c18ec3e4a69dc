package dlq_test

import (
	"log/slog"
	"testing"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// WithDefaults fills every zero field with its documented default (the
// logger with slog.Default()) and keeps what is set.
func TestConfigsWithDefaults(t *testing.T) {
	t.Parallel()
	p := dlq.PoisonConfig{}.WithDefaults()
	if p.Logger != slog.Default() || p.Timeout != dlq.PoisonTimeoutDefault || p.SweepInterval != dlq.PoisonSweepIntervalDefault ||
		p.SweepConfirm != dlq.PoisonSweepConfirmDefault || p.Limits != envelope.DefaultLimits {
		t.Errorf("PoisonConfig defaults %+v", p)
	}
	if got := (dlq.PoisonConfig{SweepInterval: -1}).WithDefaults(); got.SweepInterval != -1 {
		t.Errorf("a negative SweepInterval (no sweeping) became %v", got.SweepInterval)
	}
	h := settle.HistoryConfig{}.WithDefaults()
	if h.Bucket != settle.HistoryBucketDefault || h.TTL != settle.HistoryTTLDefault || h.Replicas != settle.HistoryReplicasDefault ||
		h.MaxAttempts != settle.HistoryMaxAttemptsDefault {
		t.Errorf("HistoryConfig defaults %+v", h)
	}
	if got := (settle.HistoryConfig{Replicas: 3, Bucket: "b"}).WithDefaults(); got.Replicas != 3 || got.Bucket != "b" {
		t.Errorf("set fields changed: %+v", got)
	}
}
