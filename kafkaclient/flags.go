package kafkaclient

import (
	"flag"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
)

// SecurityFlags are the command-line flags that secure the connection to
// the brokers (TLS, mTLS, SASL), as the examples and the eddy binary take
// them. The SASL password comes from the environment variable PasswordEnv,
// never a flag, so that it does not show in process listings.
type SecurityFlags struct {
	s Security
}

// AddSecurityFlags registers --tls, --tls-ca, --tls-cert, --tls-key,
// --sasl-mechanism and --sasl-user on fs.
func AddSecurityFlags(fs *flag.FlagSet) *SecurityFlags {
	f := &SecurityFlags{}
	fs.BoolVar(&f.s.TLS, "tls", false, "connect to the brokers over TLS, trusting the system's CAs (implied by --tls-ca)")
	fs.StringVar(&f.s.TLSCA, "tls-ca", "", "PEM file of the CA that signed the brokers' certificates; turns TLS on")
	fs.StringVar(&f.s.TLSCert, "tls-cert", "", "PEM file of this client's certificate, for brokers that require one (mTLS)")
	fs.StringVar(&f.s.TLSKey, "tls-key", "", "PEM file of the key of --tls-cert")
	fs.StringVar(&f.s.SASLMechanism, "sasl-mechanism", "", "SASL mechanism: "+strings.Join(kafka.SASLMechanisms, ", ")+" (default: no SASL)")
	fs.StringVar(&f.s.SASLUser, "sasl-user", "", "SASL user; the password is read from the environment variable "+PasswordEnv)
	return f
}

// ClientOpts returns the franz-go options for the parsed flags and the
// password in PasswordEnv, or every problem with them at once, each
// naming the flag and the fix.
func (f *SecurityFlags) ClientOpts() ([]kgo.Opt, error) {
	s := f.s
	s.SASLPassword = os.Getenv(PasswordEnv)
	return s.ClientOpts()
}
