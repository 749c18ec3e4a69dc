package dlq_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/worker/settle"
)

// BenchmarkHistoryRecord is the cost of recording one failed attempt: a
// Get and a revision-checked Update (or a Create for the first).
func BenchmarkHistoryRecord(b *testing.B) {
	_, _, j := natstest.StartProvisioned(b)
	h, err := settle.OpenHistory(context.Background(), j, settle.HistoryConfig{})
	if err != nil {
		b.Fatal(err)
	}
	a := settle.Attempt{Class: "transient", Code: "http_503", Message: "its service is unavailable (HTTP 503)", WorkerID: "worker-1"}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		a.N, a.Started = i%3+1, time.Now()
		if _, err := h.Record(ctx, "toolu_bench_"+strconv.Itoa(i/3), a); err != nil {
			b.Fatal(err)
		}
	}
}
