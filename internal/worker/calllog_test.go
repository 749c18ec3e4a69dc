package worker

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// The call logger must write what Logger.With would: the call's attributes
// first, then the record's, at the same levels, with groups and further
// attributes where With puts them.
func TestCallLoggerWritesWhatWithWould(t *testing.T) {
	t.Parallel()
	noTime := func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 {
			return slog.Attr{}
		}
		return a
	}
	for _, tc := range []struct {
		name string
		call envelope.Call
		log  func(*slog.Logger)
	}{
		{"plain", envelope.Call{ID: "toolu_1", Session: "s1"}, func(l *slog.Logger) {
			l.Info("call failed", "class", "permanent", "code", "not_found")
		}},
		{"traceparent", envelope.Call{ID: "toolu_2", Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, func(l *slog.Logger) {
			l.Warn("attempts exhausted", slog.Int("n", 3))
		}},
		{"below level", envelope.Call{ID: "toolu_3"}, func(l *slog.Logger) {
			l.Debug("not written")
		}},
		{"with and group", envelope.Call{ID: "toolu_4", Session: "s4"}, func(l *slog.Logger) {
			l.With("extra", 1).WithGroup("g").Error("inside", "k", "v")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got, want bytes.Buffer
			base := func(b *bytes.Buffer) *slog.Logger {
				return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: noTime}))
			}
			w := &Worker{cfg: Config{Logger: base(&got)}}
			tc.log(w.callLogger("echo", &tc.call, 2))

			l := base(&want).With("tool", "echo", "call_id", tc.call.ID, "attempt", 2, "session", tc.call.Session)
			if tc.call.Traceparent != "" {
				l = l.With("traceparent", tc.call.Traceparent)
			}
			tc.log(l)
			if got.String() != want.String() {
				t.Errorf("call logger wrote\n%s\nLogger.With writes\n%s", got.String(), want.String())
			}
		})
	}
}
