// Package registrytest serves eddy's own schema registry (package
// schemaregistry: Confluent's API, compatibility checks and error codes)
// in-process for one test, so the tests of the serdes, the examples and the
// harness run against the registry users run, not a fake.
package registrytest

import (
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
