package cli

import (
	"flag"
	"io"
	"net"
	"strings"
	"testing"
)

// TestConnectNobodyThereSaysWhereToPoint: a command pointed at an address
// where no NATS server listens (serve runs on other ports) says how to
// point it: --nats-url or NATS_URL, and serve's --nats-listen.
func TestConnectNobodyThereSaysWhereToPoint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // a port nothing listens on now

	var n NATSFlags
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n.Register(fs)
	if err := fs.Parse([]string{"--nats-url", "nats://" + addr}); err != nil {
		t.Fatal(err)
	}
	nc, err := n.Connect("", "test", nil)
	if err == nil {
		nc.Close()
		t.Fatalf("connected to %s, where nothing listens", addr)
	}
	for _, want := range []string{addr, "--nats-url", "NATS_URL", "--nats-listen"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q: %v", want, err)
		}
	}
}
