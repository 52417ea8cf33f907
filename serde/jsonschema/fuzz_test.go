package jsonschema_test

import (
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/serde/jsonschema"
	"github.com/eddy-streams/eddy/serde/registry"
)

// FuzzDeserialize: whatever the bytes after a valid schema id, Deserialize
// (validating, into a struct and into a map) returns a value or an
// "eddy: jsonschema:" error; it never panics.
func FuzzDeserialize(f *testing.F) {
	reg := newClient(f, newFake(f).URL(), registry.Config{})
	s := must(jsonschema.Value[PaymentV2](reg, "payments", paymentV2, jsonschema.WithValidateOnRead()))(f)
	generic := must(jsonschema.Value[map[string]any](reg, "payments", paymentV2))(f)
	good := must(s.Serialize(nil, PaymentV2{ID: "p1", Amount: 5, Currency: "EUR"}))(f)
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add(append(good[:5:5], `{"id":"\ud800","amount":1e400}`...))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= 5 {
			copy(b, good[:5])
		}
		if _, err := s.Deserialize(b); err != nil && !strings.HasPrefix(err.Error(), "eddy: jsonschema: ") {
			t.Fatalf("error %q without the eddy: jsonschema: prefix", err)
		}
		if _, err := generic.Deserialize(b); err != nil && !strings.HasPrefix(err.Error(), "eddy: jsonschema: ") {
			t.Fatalf("generic: error %q without the eddy: jsonschema: prefix", err)
		}
	})
}
