package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/classify"
)

// BenchmarkWorkerObserve is a worker's metrics for one successful call:
// InFlight up and down, and the delivery's event.
//
//	go test -run '^$' -bench WorkerObserve -benchmem ./internal/infra/metrics/
func BenchmarkWorkerObserve(b *testing.B) {
	m, err := NewWorker(prometheus.NewRegistry(), WorkerOptions{Tools: []string{"echo", "sleep", "flaky"}})
	if err != nil {
		b.Fatal(err)
	}
	ev := pooltype.WorkerEvent{Tool: "echo", Attempt: 1, Outcome: classify.FateSuccess, Executed: true,
		ExecTime: 20 * time.Microsecond, QueueWait: time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		m.InFlight("echo", 1)
		m.InFlight("echo", -1)
		m.Observe(ev)
	}
}
