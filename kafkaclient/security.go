package kafkaclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/eddy-streams/eddy/internal/kafka"
)

// Security is how a client authenticates to the brokers and protects the
// connection: TLS (optionally with a client certificate: mTLS) and SASL.
// The zero value is a plaintext, unauthenticated connection. Field errors
// name the command-line flags the examples and the eddy binary use.
type Security struct {
	// TLSCA is a PEM file of the CAs that signed the brokers'
	// certificates; setting it turns TLS on (flag --tls-ca).
	TLSCA string
	// TLS turns TLS on with the system's CAs when TLSCA is empty (--tls).
	TLS bool
	// TLSCert and TLSKey are the client's certificate and key, PEM, for
	// brokers that require client certificates (mTLS; --tls-cert, --tls-key).
	TLSCert, TLSKey string
	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: no
	// SASL (--sasl-mechanism).
	SASLMechanism string
	// SASLUser is the SASL user (--sasl-user).
	SASLUser string
	// SASLPassword is the user's password. The commands take it from the
	// environment variable EDDY_SASL_PASSWORD, never from a flag, so that
	// it does not show in process listings.
	SASLPassword string
}

// PasswordEnv is the environment variable the commands read the SASL
// password from.
const PasswordEnv = "EDDY_SASL_PASSWORD"

// SASLMechanisms returns the mechanisms Security accepts: PLAIN,
// SCRAM-SHA-256 and SCRAM-SHA-512 (the ones eddy's embedded broker serves).
func SASLMechanisms() []string { return slices.Clone(kafka.SASLMechanisms) }

// ClientOpts returns the franz-go options that apply s, or every problem
// with it at once, each naming the flag and the fix.
func (s Security) ClientOpts() ([]kgo.Opt, error) {
	var errs []error
	var opts []kgo.Opt
	if s.TLSCA != "" || s.TLS || s.TLSCert != "" || s.TLSKey != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.TLSCA != "" {
			pem, err := os.ReadFile(s.TLSCA)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("eddy: --tls-ca: %w", err))
			default:
				cfg.RootCAs = x509.NewCertPool()
				if !cfg.RootCAs.AppendCertsFromPEM(pem) {
					errs = append(errs, fmt.Errorf("eddy: --tls-ca %s: no PEM certificate in it; pass the CA certificate that signed the brokers' certificates", s.TLSCA))
				}
			}
		}
		switch {
		case (s.TLSCert == "") != (s.TLSKey == ""):
			errs = append(errs, errors.New("eddy: --tls-cert and --tls-key: pass both (a client certificate and its key) or neither"))
		case s.TLSCert != "":
			cert, err := tls.LoadX509KeyPair(s.TLSCert, s.TLSKey)
			if err != nil {
				errs = append(errs, fmt.Errorf("eddy: --tls-cert/--tls-key: %w", err))
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: cfg}
		opts = append(opts, kgo.Dialer(dialer.DialContext))
	}
	if s.SASLMechanism != "" || s.SASLUser != "" {
		var m sasl.Mechanism
		switch strings.ToUpper(s.SASLMechanism) {
		case "PLAIN":
			m = plain.Auth{User: s.SASLUser, Pass: s.SASLPassword}.AsMechanism()
		case "SCRAM-SHA-256":
			m = scram.Auth{User: s.SASLUser, Pass: s.SASLPassword}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			m = scram.Auth{User: s.SASLUser, Pass: s.SASLPassword}.AsSha512Mechanism()
		case "":
			errs = append(errs, fmt.Errorf("eddy: --sasl-user %q without --sasl-mechanism: pass one of %s", s.SASLUser, strings.Join(kafka.SASLMechanisms, ", ")))
		default:
			errs = append(errs, fmt.Errorf("eddy: --sasl-mechanism %q: pass one of %s", s.SASLMechanism, strings.Join(kafka.SASLMechanisms, ", ")))
		}
		if s.SASLMechanism != "" && s.SASLUser == "" {
			errs = append(errs, fmt.Errorf("eddy: --sasl-mechanism %s without --sasl-user: pass the user", s.SASLMechanism))
		}
		if s.SASLUser != "" && s.SASLPassword == "" {
			errs = append(errs, fmt.Errorf("eddy: --sasl-user %s: no password; set it in the environment variable %s", s.SASLUser, PasswordEnv))
		}
		if m != nil {
			opts = append(opts, kgo.SASL(m))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return opts, nil
}
