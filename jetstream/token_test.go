package jetstream_test

import (
	"strings"
	"testing"

	"github.com/toolpool/toolpool/jetstream"
)

func TestCheckToken(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"echo", "orch-1", "Az09_-", strings.Repeat("a", jetstream.MaxTokenLen)} {
		if err := jetstream.CheckToken("instance", ok); err != nil {
			t.Errorf("CheckToken(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a.b", "tools.>", "*", "a b", "a\r\nPUB x", strings.Repeat("r", 5000)} {
		err := jetstream.CheckToken("reply_to", bad)
		if err == nil {
			t.Errorf("CheckToken(%.20q) accepted it", bad)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "reply_to ") || len(msg) > 200 {
			t.Errorf("CheckToken(%.20q) = %q; want a short error naming reply_to", bad, msg)
		}
	}
}
