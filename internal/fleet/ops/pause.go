package ops

import (
	"context"
	"fmt"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
)

// PauseForeverDefault is how long PauseTool pauses a tool when it is not
// told: until someone resumes it.
const PauseForeverDefault = 10 * 365 * 24 * time.Hour

// PauseTool pauses the tool's consumer on the server until until (zero:
// PauseForeverDefault from now): no worker of the fleet gets its calls
// until then or until ResumeTool; calls keep queueing in TOOL_CALLS, and
// those already running finish. The same pause a worker sets after a rate
// limit (tools.Tool.PauseOn429Above).
func PauseTool(ctx context.Context, j js.JetStream, tool string, until time.Time) (time.Time, error) {
	if until.IsZero() {
		until = time.Now().Add(PauseForeverDefault)
	}
	resp, err := j.PauseConsumer(ctx, jetstream.StreamCalls, jetstream.ConsumerName(tool), until)
	if err != nil {
		return time.Time{}, fmt.Errorf("ops: pause %s: %w", tool, err)
	}
	return resp.PauseUntil, nil
}

// ResumeTool ends the tool's pause: its workers get its calls again.
func ResumeTool(ctx context.Context, j js.JetStream, tool string) error {
	if _, err := j.ResumeConsumer(ctx, jetstream.StreamCalls, jetstream.ConsumerName(tool)); err != nil {
		return fmt.Errorf("ops: resume %s: %w", tool, err)
	}
	return nil
}
