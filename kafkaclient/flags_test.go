package kafkaclient

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestSecurityFlags: the flags set the options, the password comes from
// the environment, and every problem is reported at once, naming the flag.
func TestSecurityFlags(t *testing.T) {
	parse := func(args ...string) *SecurityFlags {
		t.Helper()
		fs := flag.NewFlagSet("app", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := AddSecurityFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f
	}

	t.Setenv(PasswordEnv, "")
	_, err := parse("--tls-cert", "c.pem", "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "u").ClientOpts()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"--tls-cert and --tls-key: pass both", "--sasl-user u: no password", PasswordEnv} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, "eddy: ") {
			t.Errorf("error line %q does not begin with eddy:", line)
		}
	}

	t.Setenv(PasswordEnv, "pw")
	opts, err := parse("--sasl-mechanism", "PLAIN", "--sasl-user", "u").ClientOpts()
	if err != nil || len(opts) != 1 {
		t.Fatalf("SASL flags with the password in %s: %d options, %v; want the SASL option", PasswordEnv, len(opts), err)
	}
	if opts, err := parse().ClientOpts(); err != nil || len(opts) != 0 {
		t.Fatalf("no flags: %d options, %v; want none (plaintext)", len(opts), err)
	}
}
