// Package registrytest serves eddy's own schema registry (package
// schemaregistry: Confluent's API, compatibility checks and error codes)
// in-process for one test, so the tests of the serdes, the examples and the
// harness run against the registry users run, not a fake.
package registrytest

import (
	"net"
	"net/http/httptest"
	"testing"

	"github.com/eddy-streams/eddy/schemaregistry"
)

// Start serves a registry kept in memory until the test ends and returns
// its URL.
func Start(t testing.TB, opts ...schemaregistry.Option) string {
	t.Helper()
	reg, err := schemaregistry.NewServer("", opts...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg)
	t.Cleanup(func() { srv.Close(); reg.Close() })
	return srv.URL
}

// ClosedURL is the URL of a port on which nothing listens: a registry
// that is down, for the tests of what a client does then.
func ClosedURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}
