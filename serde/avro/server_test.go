package avro_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/testutil/registrytest"

	"github.com/eddy-streams/eddy/schemaregistry"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/avro"
	"github.com/eddy-streams/eddy/serde/registry"
)

// eddyRegistry serves eddy's own development registry (package
// schemaregistry), which checks compatibility as Confluent's does, where
// srfake accepts every schema.
func eddyRegistry(t *testing.T, opts ...schemaregistry.Option) string {
	return registrytest.Start(t, opts...)
}

// TestEddyRegistry runs the serde against eddy's registry: evolution
// both ways, an incompatible schema refused at Check with the registry's
// own message, an unknown id, and refused credentials.
func TestEddyRegistry(t *testing.T) {
	url := eddyRegistry(t)
	reg := newClient(t, url, registry.Config{})
	v1 := must(avro.Value[PaymentV1](reg, "payments", paymentV1))(t)
	v2 := must(avro.Value[PaymentV2](reg, "payments", paymentV2))(t)
	old := must(v1.Serialize(nil, PaymentV1{ID: "old", Amount: 1}))(t)
	young := must(v2.Serialize(nil, PaymentV2{ID: "new", Amount: 2, Currency: "USD"}))(t)
	if got := must(v2.Deserialize(old))(t); got != (PaymentV2{ID: "old", Amount: 1, Currency: "EUR"}) {
		t.Fatalf("new reader, old record: %+v", got)
	}
	if got := must(v1.Deserialize(young))(t); got != (PaymentV1{ID: "new", Amount: 2}) {
		t.Fatalf("old reader, new record: %+v", got)
	}

	// amount becomes a string: BACKWARD (the default) refuses it.
	bad := must(avro.Value[map[string]any](reg, "payments", strings.Replace(paymentV1, `"type":"long"`, `"type":"string"`, 1)))(t)
	err := bad.Check(context.Background())
	if !errors.Is(err, registry.ErrIncompatible) || errors.Is(err, serde.ErrUnavailable) || !strings.Contains(err.Error(), "incompatible") {
		t.Fatalf("Check of an incompatible schema = %v", err)
	}
	t.Log(err)

	unknown := append([]byte{0, 0, 0, 0x30, 0x39}, old[5:]...)
	if _, err := v1.Deserialize(unknown); !errors.Is(err, registry.ErrUnknownID) || errors.Is(err, serde.ErrUnavailable) {
		t.Fatalf("unknown id: %v", err)
	}

	withAuth := eddyRegistry(t, schemaregistry.WithBasicAuth(map[string]string{"app": "secret"}))
	wrong := must(avro.Value[PaymentV1](newClient(t, withAuth, registry.Config{Username: "app", Password: "wrong", Timeout: 200 * time.Millisecond}), "payments", paymentV1))(t)
	if err := wrong.Check(context.Background()); !errors.Is(err, serde.ErrUnavailable) || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("Check with a wrong password = %v", err)
	}
	right := must(avro.Value[PaymentV1](newClient(t, withAuth, registry.Config{Username: "app", Password: "secret"}), "payments", paymentV1))(t)
	if err := right.Check(context.Background()); err != nil {
		t.Fatalf("Check with the right password: %v", err)
	}
}
