package kafkaclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/testutil"
)

func TestSecurityClientOptsErrors(t *testing.T) {
	certs, err := testutil.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		s    Security
		want []string
	}{
		{"missing CA file", Security{TLSCA: "/nonexistent/ca.pem"}, []string{"--tls-ca", "no such file"}},
		{"CA file without a certificate", Security{TLSCA: certs.ServerKey}, []string{"--tls-ca", "no PEM certificate"}},
		{"cert without key", Security{TLSCert: certs.ClientCert}, []string{"--tls-cert and --tls-key: pass both"}},
		{"unknown mechanism", Security{SASLMechanism: "GSSAPI", SASLUser: "u", SASLPassword: "p"}, []string{`--sasl-mechanism "GSSAPI"`, "SCRAM-SHA-256"}},
		{"mechanism without user", Security{SASLMechanism: "PLAIN"}, []string{"without --sasl-user"}},
		{"user without mechanism", Security{SASLUser: "u", SASLPassword: "p"}, []string{"without --sasl-mechanism"}},
		{"no password", Security{SASLMechanism: "SCRAM-SHA-256", SASLUser: "u"}, []string{"no password", PasswordEnv}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.s.ClientOpts()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestSecureBroker runs the embedded broker with TLS and SASL users, and
// checks that clients with the right settings work with every mechanism,
// and that a client without TLS, without SASL or with a wrong password is
// refused at once with ErrSecurityMismatch (not after StartupWait).
func TestSecureBroker(t *testing.T) {
	ctx := testContext(t)
	certs, err := testutil.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := startTestBroker(t, kafka.BrokerConfig{TLS: serverTLS(t, certs, false), Users: []kafka.User{{Name: "ledger", Password: "s3cret:with:colons"}}})

	for _, m := range SASLMechanisms() {
		opts, err := Security{TLSCA: certs.CA, SASLMechanism: m, SASLUser: "ledger", SASLPassword: "s3cret:with:colons"}.ClientOpts()
		if err != nil {
			t.Fatal(err)
		}
		cl := newTestClient(t, b.Addr(), opts...)
		topic := "t-" + strings.ToLower(m)
		if err := CreateTopics(ctx, cl, 1, topic); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", m, err)
		}
	}

	refused := func(name string, s Security) {
		t.Helper()
		opts, err := s.ClientOpts()
		if err != nil {
			t.Fatal(err)
		}
		cl := newTestClient(t, b.Addr(), opts...)
		start := time.Now()
		_, err = Partitions(ctx, cl, "t-plain")
		if !errors.Is(err, kafka.ErrSecurityMismatch) {
			t.Errorf("%s: %v, want ErrSecurityMismatch", name, err)
		}
		if waited := time.Since(start); waited >= kafka.StartupWait {
			t.Errorf("%s: refused after %v: waited as for an unreachable broker", name, waited)
		}
	}
	refused("plaintext", Security{})
	refused("TLS without SASL", Security{TLSCA: certs.CA})
	refused("wrong password", Security{TLSCA: certs.CA, SASLMechanism: "SCRAM-SHA-256", SASLUser: "ledger", SASLPassword: "wrong"})
	refused("unknown user", Security{TLSCA: certs.CA, SASLMechanism: "PLAIN", SASLUser: "mallory", SASLPassword: "s3cret:with:colons"})
}

// TestMutualTLS checks that a broker requiring client certificates refuses
// a client without one and accepts a client with one its CA signed.
func TestMutualTLS(t *testing.T) {
	ctx := testContext(t)
	certs, err := testutil.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := startTestBroker(t, kafka.BrokerConfig{TLS: serverTLS(t, certs, true)})

	opts, err := Security{TLSCA: certs.CA}.ClientOpts()
	if err != nil {
		t.Fatal(err)
	}
	noCert := newTestClient(t, b.Addr(), opts...)
	if _, err := Partitions(ctx, noCert, "x"); !errors.Is(err, kafka.ErrSecurityMismatch) {
		t.Fatalf("a client without a certificate: %v, want ErrSecurityMismatch", err)
	}
	// A client that does not trust the broker's CA refuses the broker.
	untrusting := newTestClient(t, b.Addr(), mustOpts(t, Security{TLS: true, TLSCert: certs.ClientCert, TLSKey: certs.ClientKey})...)
	if _, err := Partitions(ctx, untrusting, "x"); !errors.Is(err, kafka.ErrSecurityMismatch) {
		t.Fatalf("a client without the broker's CA: %v, want ErrSecurityMismatch", err)
	}

	opts, err = Security{TLSCA: certs.CA, TLSCert: certs.ClientCert, TLSKey: certs.ClientKey}.ClientOpts()
	if err != nil {
		t.Fatal(err)
	}
	cl := newTestClient(t, b.Addr(), opts...)
	if err := CreateTopics(ctx, cl, 1, "mtls"); err != nil {
		t.Fatal(err)
	}
}

func mustOpts(t *testing.T, s Security) []kgo.Opt {
	t.Helper()
	opts, err := s.ClientOpts()
	if err != nil {
		t.Fatal(err)
	}
	return opts
}

func serverTLS(t *testing.T, certs testutil.Certs, requireClientCert bool) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(certs.ServerCert, certs.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if requireClientCert {
		pem, err := os.ReadFile(certs.CA)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ClientCAs = x509.NewCertPool()
		cfg.ClientCAs.AppendCertsFromPEM(pem)
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg
}

// hangGuard bounds a test that would otherwise wait for a broker forever.
const hangGuard = 30 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

func startTestBroker(t *testing.T, cfg kafka.BrokerConfig) *kafka.Broker {
	t.Helper()
	b, err := kafka.StartBroker(cfg)
	if err != nil {
		t.Fatalf("StartBroker: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

func newTestClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}
