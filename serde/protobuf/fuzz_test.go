package protobuf_test

import (
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/serde/protobuf"
	"github.com/eddy-streams/eddy/serde/protobuf/internal/testpb"
	"github.com/eddy-streams/eddy/serde/registry"
)

// FuzzDeserialize: whatever the bytes after a valid schema id, Deserialize
// returns a message or an "eddy: protobuf:" error; it never panics.
func FuzzDeserialize(f *testing.F) {
	reg := newClient(f, newFake(f).URL(), registry.Config{})
	s := must(protobuf.Value[*testpb.Order](reg, "orders"))(f)
	note := "gift"
	good := must(s.Serialize(nil, &testpb.Order{Id: "o1", Lines: []*testpb.Line{{Sku: "a", Qty: 2}}, Tags: map[string]string{"k": "v"},
		Note: &note, Price: 9.5, Pay: &testpb.Order_Card{Card: "visa"}}))(f)
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add(append(good[:5:5], 4, 2, 0, 0x0a))
	f.Add(append(good[:5:5], 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= 5 {
			copy(b, good[:5]) // the registered id: exercise the rest
		}
		if _, err := s.Deserialize(b); err != nil && !strings.HasPrefix(err.Error(), "eddy: protobuf: ") {
			t.Fatalf("error %q without the eddy: protobuf: prefix", err)
		}
	})
}
