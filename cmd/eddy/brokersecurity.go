package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/eddy-streams/eddy/internal/kafka"
)

// brokerTLS builds the broker's TLS configuration from --tls-cert,
// --tls-key and --tls-client-ca (which makes client certificates
// required: mTLS). Nil without a certificate.
func brokerTLS(certFile, keyFile, clientCA string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		if clientCA != "" {
			return nil, errors.New("--tls-client-ca needs --tls-cert and --tls-key: client certificates are checked only over TLS")
		}
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("--tls-cert and --tls-key: pass both, the broker's certificate and its key (PEM)")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		pem, err := os.ReadFile(clientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		cfg.ClientCAs = x509.NewCertPool()
		if !cfg.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-client-ca %s: no PEM certificate in it", clientCA)
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// readUsers reads a --sasl-users-file: one "user:password" per line; blank
// lines and lines starting with # are skipped. The password is what
// follows the first colon, so it may contain colons.
func readUsers(path string) ([]kafka.User, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--sasl-users-file: %w", err)
	}
	var users []kafka.User
	var errs []error
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, pass, ok := strings.Cut(line, ":")
		switch {
		case !ok || name == "" || pass == "":
			errs = append(errs, fmt.Errorf("--sasl-users-file %s line %d: want user:password", path, n))
		case seen[name]:
			errs = append(errs, fmt.Errorf("--sasl-users-file %s line %d: user %q listed twice", path, n, name))
		default:
			seen[name] = true
			users = append(users, kafka.User{Name: name, Password: pass})
		}
	}
	if len(users) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("--sasl-users-file %s: no user in it; write one user:password per line", path))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return users, nil
}
