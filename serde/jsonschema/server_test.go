package jsonschema_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/internal/testutil/registrytest"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/jsonschema"
	"github.com/eddy-streams/eddy/serde/registry"
)

func eddyRegistry(t *testing.T) string { return registrytest.Start(t) }

// TestEddyRegistry runs the serde against eddy's registry, which checks
// JSON Schema compatibility: an optional property added is accepted and
// read both ways, a property whose type changes is refused at Check.
func TestEddyRegistry(t *testing.T) {
	reg := newClient(t, eddyRegistry(t), registry.Config{})
	v1 := must(jsonschema.Value[PaymentV1](reg, "payments", paymentV1, jsonschema.WithValidateOnRead()))(t)
	v2 := must(jsonschema.Value[PaymentV2](reg, "payments", paymentV2, jsonschema.WithValidateOnRead()))(t)
	old := must(v1.Serialize(nil, PaymentV1{ID: "old", Amount: 1}))(t)
	young := must(v2.Serialize(nil, PaymentV2{ID: "new", Amount: 2, Currency: "USD"}))(t)
	if got := must(v1.Deserialize(young))(t); got != (PaymentV1{ID: "new", Amount: 2}) {
		t.Fatalf("old reader, new record: %+v", got)
	}
	if got := must(v2.Deserialize(old))(t); got != (PaymentV2{ID: "old", Amount: 1}) {
		t.Fatalf("new reader, old record: %+v", got)
	}

	bad := must(jsonschema.Value[map[string]any](reg, "payments", strings.Replace(paymentV2, `"amount":{"type":"integer"`, `"amount":{"type":"string"`, 1)))(t)
	err := bad.Check(context.Background())
	if !errors.Is(err, registry.ErrIncompatible) || errors.Is(err, serde.ErrUnavailable) {
		t.Fatalf("Check of an incompatible schema = %v", err)
	}
	t.Log(err)

	unknown := append([]byte{0, 0, 0, 0x30, 0x39}, old[5:]...)
	if _, err := v1.Deserialize(unknown); !errors.Is(err, registry.ErrUnknownID) {
		t.Fatalf("unknown id: %v", err)
	}
}
