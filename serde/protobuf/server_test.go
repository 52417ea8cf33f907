package protobuf_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/internal/testutil/registrytest"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/protobuf"
	"github.com/eddy-streams/eddy/serde/protobuf/internal/testpb"
	"github.com/eddy-streams/eddy/serde/registry"
)

// eddyRegistry serves eddy's own development registry, which parses
// Protobuf schemas and checks their compatibility, where srfake accepts
// every text.
func eddyRegistry(t *testing.T) string { return registrytest.Start(t) }

// TestEddyRegistry: the printed .proto is accepted by a registry that
// parses it; a newer writer's record is read by the old serde; a schema
// incompatible with the subject's is refused at Check with the
// registry's message.
func TestEddyRegistry(t *testing.T) {
	reg := newClient(t, eddyRegistry(t), registry.Config{})
	s := must(protobuf.Value[*testpb.Payment](reg, "payments"))(t)
	if err := s.Check(context.Background()); err != nil {
		t.Fatalf("Check: %v\nschema:\n%s", err, s.Schema())
	}
	if !strings.Contains(s.Schema(), `import "google/protobuf/timestamp.proto"`) {
		t.Fatalf("the test file should import a well-known type:\n%s", s.Schema())
	}
	in := &testpb.Payment{Id: "p1", Amount: 42}
	if out := must(s.Deserialize(must(s.Serialize(nil, in))(t)))(t); !proto.Equal(out, in) {
		t.Fatalf("round trip: %v", out)
	}
	rec, _ := newerRecord(t, reg) // compatible: a field added
	if got := must(s.Deserialize(rec))(t); got.Id != "p2" || len(got.ProtoReflect().GetUnknown()) == 0 {
		t.Fatalf("old reader, new record: %v", got)
	}

	// The subject's latest makes amount a string: the serde's int64
	// amount is incompatible (BACKWARD, the default).
	reg2 := newClient(t, eddyRegistry(t), registry.Config{})
	must(reg2.Register(context.Background(), "payments-value", sr.Schema{Type: sr.TypeProtobuf,
		Schema: "syntax = \"proto3\";\npackage eddy.test.bank;\nmessage Payment { string id = 1; string amount = 2; }\n"}))(t)
	bad := must(protobuf.Value[*testpb.Payment](reg2, "payments"))(t)
	err := bad.Check(context.Background())
	if !errors.Is(err, registry.ErrIncompatible) || errors.Is(err, serde.ErrUnavailable) || !strings.Contains(err.Error(), "amount") {
		t.Fatalf("Check of an incompatible schema = %v", err)
	}
	t.Log(err)

	unknown := append([]byte{0, 0, 0, 0x30, 0x39}, rec[5:]...)
	if _, err := s.Deserialize(unknown); !errors.Is(err, registry.ErrUnknownID) || errors.Is(err, serde.ErrUnavailable) {
		t.Fatalf("unknown id: %v", err)
	}
}
