package embedded_test

import (
	"context"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/jetstream"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testContext is a context that ends with the test or after 20 s.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// streamInfos returns the pool's streams' info, by name.
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
