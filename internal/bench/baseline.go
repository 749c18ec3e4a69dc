package bench

import (
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/jetstream"
)

// The baseline's own streams: the pool's configurations under other names
// and subjects, so nothing it does touches the pool's streams or consumers.
const (
	rawCallStream    = "BENCH_RAW_CALLS"
	rawResultStream  = "BENCH_RAW_RESULTS"
	rawCallSubject   = "benchraw.call.echo"
	rawResultSubject = "benchraw.result.bench"
	rawConsumer      = "bench_raw"
)

// rawConfig is the baseline's setup: the pool's stream configurations and
// the loaded tool's consumer configuration, renamed.
func (r *runner) rawConfig(calls, results js.StreamConfig) rawConfig {
	calls.Name, calls.Subjects = rawCallStream, []string{"benchraw.call.>"}
	calls.Description = "toolpool bench: raw baseline calls"
	results.Name, results.Subjects = rawResultStream, []string{"benchraw.result.>"}
	results.Description = "toolpool bench: raw baseline results"
	rt, _ := r.reg.Lookup(r.cfg.Tool)
	cc := jetstream.ConsumerConfig(jetstream.ConsumerSpec{
		Tool: rt.Name, Timeout: rt.Timeout, MaxAttempts: rt.Retry.MaxAttempts, Concurrency: rt.Concurrency,
	})
	cc.Durable, cc.Name, cc.FilterSubject, cc.Description = rawConsumer, "", rawCallSubject, "toolpool bench: raw baseline"
	work := time.Duration(0)
	if r.cfg.Tool == ToolSleep {
		work = r.cfg.Sleep
	}
	return rawConfig{
		callStream: calls, resultStream: results, consumer: cc,
		callSubject: rawCallSubject, resultSubject: rawResultSubject,
		callSize: r.callBytes, resultSize: r.resultBytes,
		// The dispatcher sends the call's trace context in a header too.
		traceparent: dispatch.NewTraceparent(),
		executors:   r.cfg.Workers * r.cfg.WorkerConcurrency,
		// As pkg/worker pulls.
		pullMax:     min(r.cfg.WorkerConcurrency, 512),
		work:        work,
		turnTimeout: r.cfg.TurnTimeout,
	}
}
