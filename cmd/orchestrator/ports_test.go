package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

// TestServePortInUseNamesTheFlag: a second `serve` on the ports of a
// running one fails at once, and its message names the flag that moves
// it: --nats-listen for the embedded server's port (and NATS_URL for the
// other commands), --http for the HTTP port.
func TestServePortInUseNamesTheFlag(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"nats", []string{"--nats-listen", addr, "--http", ""}, []string{addr, "in use", "--nats-listen", "NATS_URL", "--nats-url"}},
		{"http", []string{"--nats-listen", "127.0.0.1:0", "--http", addr, "--workers", "0"}, []string{addr, "in use", "--http"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"serve", "--data-dir", t.TempDir(), "--workspace", t.TempDir()}, tc.args...)
			if code := run(t.Context(), args, &stdout, &stderr); code == 0 {
				t.Fatalf("serve on a taken port exited 0:\n%s", stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("the message does not name %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}
