package embedded

import "testing"

func TestParseListen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		host     string
		port     int
		hasError bool
	}{
		{"127.0.0.1:4222", "127.0.0.1", 4222, false},
		{"127.0.0.1:0", "127.0.0.1", -1, false},
		{"127.0.0.1:-1", "127.0.0.1", -1, false},
		{":4222", "0.0.0.0", 4222, false},
		{"[::1]:4222", "::1", 4222, false},
		{"localhost:5000", "localhost", 5000, false},
		{"127.0.0.1", "", 0, true},
		{"127.0.0.1:-2", "", 0, true},
		{"127.0.0.1:65536", "", 0, true},
	} {
		host, port, err := parseListen(tc.in)
		if (err != nil) != tc.hasError || host != tc.host || port != tc.port {
			t.Errorf("parseListen(%q) = %q, %d, %v; want %q, %d, error %v", tc.in, host, port, err, tc.host, tc.port, tc.hasError)
		}
	}
}

func TestClientHost(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"0.0.0.0":   "127.0.0.1",
		"::":        "::1",
		"127.0.0.1": "127.0.0.1",
		"10.1.2.3":  "10.1.2.3",
		"localhost": "localhost",
	} {
		if got := clientHost(in); got != want {
			t.Errorf("clientHost(%q) = %q, want %q", in, got, want)
		}
	}
}
