package jetstream_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
)

// runServer starts a plain nats-server (no JetStream) with opts on a free
// loopback port, for authentication tests.
func runServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestConnectUserPassword(t *testing.T) {
	t.Parallel()
	srv, err := embedded.Start(embedded.Options{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), Logger: natstest.Logger(t),
		User: "agent", Password: "s3cret-pw",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	url := srv.ClientURL()

	nc, err := jetstream.Connect(jetstream.ConnectOptions{URL: url, User: "agent", Password: "s3cret-pw", Name: "test-client", Logger: quiet()})
	if err != nil {
		t.Fatalf("Connect with the right password: %v", err)
	}
	if !nc.IsConnected() {
		t.Error("not connected")
	}
	if err := nc.Flush(); err != nil {
		t.Error(err)
	}
	nc.Close()

	for _, tc := range []struct {
		name string
		opts jetstream.ConnectOptions
	}{
		{"wrong password", jetstream.ConnectOptions{URL: url, User: "agent", Password: "wrong-pw"}},
		{"no credentials", jetstream.ConnectOptions{URL: url}},
		{"wrong password in URL", jetstream.ConnectOptions{URL: strings.Replace(url, "nats://", "nats://agent:wrong-pw@", 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.opts.Logger = quiet()
			nc, err := jetstream.Connect(tc.opts)
			if err == nil {
				nc.Close()
				t.Fatal("Connect succeeded, want an authorization error")
			}
			if !errors.Is(err, nats.ErrAuthorization) {
				t.Errorf("errors.Is(err, nats.ErrAuthorization) = false for %v", err)
			}
			msg := err.Error()
			hostPort := strings.TrimPrefix(url, "nats://")
			if !strings.HasPrefix(msg, "jetstream: connect to nats at ") || !strings.Contains(msg, hostPort) {
				t.Errorf("error %q does not say which server it failed to connect to", msg)
			}
			if strings.Contains(msg, "wrong-pw") || strings.Contains(msg, "s3cret-pw") {
				t.Errorf("error %q leaks a password", msg)
			}
		})
	}
}

func TestConnectUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens here now
	start := time.Now()
	_, err = jetstream.Connect(jetstream.ConnectOptions{URL: "nats://u:topsecret@" + addr, Logger: quiet()})
	if err == nil {
		t.Fatal("Connect to a closed port succeeded")
	}
	if want := "jetstream: connect to nats at nats://u:xxxxx@" + addr + ": "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want prefix %q", err, want)
	}
	if strings.Contains(err.Error(), "topsecret") {
		t.Errorf("error %q leaks the password", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("failing to connect took %v; the first connect should not retry", d)
	}
}

func TestConnectNKey(t *testing.T) {
	t.Parallel()
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	s := runServer(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})

	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	nc, err := jetstream.Connect(jetstream.ConnectOptions{URL: s.ClientURL(), NKeyFile: seedFile, Logger: quiet()})
	if err != nil {
		t.Fatalf("Connect with nkey: %v", err)
	}
	nc.Close()

	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	otherFile := filepath.Join(t.TempDir(), "other.nk")
	if err := os.WriteFile(otherFile, otherSeed, 0o600); err != nil {
		t.Fatal(err)
	}
	if nc, err := jetstream.Connect(jetstream.ConnectOptions{URL: s.ClientURL(), NKeyFile: otherFile, Logger: quiet()}); err == nil {
		nc.Close()
		t.Error("Connect with an unknown nkey succeeded")
	} else if strings.Contains(err.Error(), string(otherSeed)) {
		t.Errorf("error %q leaks the seed", err)
	}
}

func TestConnectTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pki := newTestPKI(t, dir)
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: pki.serverCert, KeyFile: pki.serverKey, CaFile: pki.ca, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	s := runServer(t, &server.Options{TLSConfig: tc, TLSVerify: true, TLSTimeout: 2})
	url := s.ClientURL()

	nc, err := jetstream.Connect(jetstream.ConnectOptions{URL: url, CAFile: pki.ca, CertFile: pki.clientCert, KeyFile: pki.clientKey, Logger: quiet()})
	if err != nil {
		t.Fatalf("Connect with mutual TLS: %v", err)
	}
	if _, err := nc.TLSConnectionState(); err != nil {
		t.Errorf("connection is not TLS: %v", err)
	}
	nc.Close()

	if nc, err := jetstream.Connect(jetstream.ConnectOptions{URL: url, CAFile: pki.ca, Logger: quiet()}); err == nil {
		nc.Close()
		t.Error("Connect without a client certificate succeeded against a server that requires one")
	}
	if nc, err := jetstream.Connect(jetstream.ConnectOptions{URL: url, Logger: quiet()}); err == nil {
		nc.Close()
		t.Error("Connect without the CA succeeded against a server with a private CA")
	}
}

type testPKI struct{ ca, serverCert, serverKey, clientCert, clientKey string }

// newTestPKI writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all PEM, into dir.
func newTestPKI(t *testing.T, dir string) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "toolpool test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)

	leaf := func(serial int64, name string, usage x509.ExtKeyUsage, ips []net.IP) (certPEM, keyPEM []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	}
	sc, sk := leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	cc, ck := leaf(3, "worker", x509.ExtKeyUsageClientAuth, nil)
	p := testPKI{
		ca: filepath.Join(dir, "ca.pem"), serverCert: filepath.Join(dir, "server.pem"), serverKey: filepath.Join(dir, "server-key.pem"),
		clientCert: filepath.Join(dir, "client.pem"), clientKey: filepath.Join(dir, "client-key.pem"),
	}
	for path, data := range map[string][]byte{
		p.ca: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), p.serverCert: sc, p.serverKey: sk, p.clientCert: cc, p.clientKey: ck,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func TestConnectOptionsValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "exists")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name string
		opts jetstream.ConnectOptions
		want string // substring of the error; "" means valid
	}{
		{"nothing", jetstream.ConnectOptions{}, ""},
		{"user and password", jetstream.ConnectOptions{User: "u", Password: "p"}, ""},
		{"user alone", jetstream.ConnectOptions{User: "u"}, ""},
		{"creds", jetstream.ConnectOptions{Creds: file}, ""},
		{"mutual TLS", jetstream.ConnectOptions{CAFile: file, CertFile: file, KeyFile: file}, ""},
		{"creds and user", jetstream.ConnectOptions{Creds: file, User: "u"}, "only one of"},
		{"nkey and creds", jetstream.ConnectOptions{Creds: file, NKeyFile: file}, "only one of"},
		{"password without user", jetstream.ConnectOptions{Password: "p"}, "NATS_PASSWORD"},
		{"cert without key", jetstream.ConnectOptions{CertFile: file}, "NATS_KEY"},
		{"key without cert", jetstream.ConnectOptions{KeyFile: file}, "NATS_CERT"},
		{"missing creds", jetstream.ConnectOptions{Creds: missing}, "creds file"},
		{"missing nkey", jetstream.ConnectOptions{NKeyFile: missing}, "nkey seed file"},
		{"missing CA", jetstream.ConnectOptions{CAFile: missing}, "CA file"},
		{"negative timeout", jetstream.ConnectOptions{Timeout: -1}, "Timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.opts.WithDefaults().Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
			if tc.want != "" {
				// Connect refuses the same options before dialling.
				if _, cerr := jetstream.Connect(tc.opts); cerr == nil || cerr.Error() != err.Error() {
					t.Errorf("Connect() = %v, want the Validate error", cerr)
				}
			}
		})
	}
}

func TestConnectOptionsWithDefaults(t *testing.T) {
	t.Parallel()
	o := jetstream.ConnectOptions{}.WithDefaults()
	if o.URL != nats.DefaultURL || o.Name != "toolpool" || o.Logger == nil || o.Timeout != 5*time.Second ||
		o.ReconnectWait != 2*time.Second || o.ReconnectJitter != time.Second || o.ReconnectBufSize != 8<<20 {
		t.Errorf("ConnectOptions{}.WithDefaults() = %+v", o)
	}
}

func TestConnectOptionsFromEnv(t *testing.T) {
	// t.Setenv: not parallel.
	env := map[string]string{
		"NATS_URL": "nats://a:4222,nats://b:4222", "NATS_CREDS": "/c.creds", "NATS_USER": "u", "NATS_PASSWORD": "p",
		"NATS_NKEY": "/u.nk", "NATS_CA": "/ca.pem", "NATS_CERT": "/cert.pem", "NATS_KEY": "/key.pem",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	got := jetstream.ConnectOptionsFromEnv()
	want := jetstream.ConnectOptions{
		URL: "nats://a:4222,nats://b:4222", Creds: "/c.creds", User: "u", Password: "p",
		NKeyFile: "/u.nk", CAFile: "/ca.pem", CertFile: "/cert.pem", KeyFile: "/key.pem",
	}
	if got != want {
		t.Errorf("ConnectOptionsFromEnv() = %+v, want %+v", got, want)
	}
	for k := range env {
		t.Setenv(k, "")
	}
	if got := jetstream.ConnectOptionsFromEnv(); got != (jetstream.ConnectOptions{}) {
		t.Errorf("ConnectOptionsFromEnv() with nothing set = %+v, want zero", got)
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://user:pw@host:4222", "nats://user:xxxxx@host:4222"},
		{"nats://s3cr3ttoken@host:4222", "nats://xxxxx@host:4222"},
		{"tls://a:b@h1:4222, nats://h2:4222", "tls://a:xxxxx@h1:4222,nats://h2:4222"},
		{"user:pw@host:4222", "user:xxxxx@host:4222"},
		{"nats://us%zz:pw@host", "xxxxx@host"},
		{"", ""},
	} {
		if got := jetstream.RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	natstest.Eventually(t, 10*time.Second, what, cond)
}

func TestConnectReconnectsAndLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:0", DataDir: dir, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	url := srv.ClientURL()

	var logs natstest.LockedBuffer
	nc, err := jetstream.Connect(jetstream.ConnectOptions{
		URL: url, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		ReconnectWait: 20 * time.Millisecond, ReconnectJitter: 10 * time.Millisecond,
	})
	if err != nil {
		srv.Shutdown()
		t.Fatal(err)
	}

	srv.Shutdown()
	waitFor(t, "the disconnect to be logged", func() bool { return strings.Contains(logs.String(), "nats: disconnected") })

	// Same address, same store: the client finds it again by itself.
	srv, err = embedded.Start(embedded.Options{Listen: strings.TrimPrefix(url, "nats://"), DataDir: dir, Logger: natstest.Logger(t)})
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	waitFor(t, "the reconnect to be logged", func() bool { return strings.Contains(logs.String(), "nats: reconnected") })
	if !nc.IsConnected() {
		t.Error("not connected after the reconnect was logged")
	}
	if err := nc.Flush(); err != nil {
		t.Errorf("flush after reconnect: %v", err)
	}
	nc.Close()
	waitFor(t, "the close to be logged", func() bool { return strings.Contains(logs.String(), "nats: connection closed") })
}
