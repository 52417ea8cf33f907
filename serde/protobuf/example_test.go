package protobuf_test

import (
	"context"
	"fmt"
	"log"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/protobuf"
	"github.com/eddy-streams/eddy/serde/protobuf/internal/testpb"
	"github.com/eddy-streams/eddy/serde/registry"
)

// An app reading and writing Protobuf payments (a generated type)
// through a schema registry. Check registers the message's .proto file
// before the app runs.
func Example() {
	fake := srfake.New() // in an app: the registry's URL
	defer fake.Close()
	reg, err := registry.New(registry.Config{URLs: []string{fake.URL()}})
	if err != nil {
		log.Fatal(err)
	}
	in, err := protobuf.Value[*testpb.Payment](reg, "payments")
	if err != nil {
		log.Fatal(err)
	}
	out, err := protobuf.Value[*testpb.Payment](reg, "large-payments")
	if err != nil {
		log.Fatal(err)
	}
	if err := out.Check(context.Background()); err != nil {
		log.Fatal(err) // before eddy.New: the app fails at start
	}

	topo := eddy.NewTopology()
	payments := eddy.Source(topo, "payments", serde.String(), in)
	large := eddy.Filter(payments, func(_ string, p *testpb.Payment) bool { return p.GetAmount() >= 1000 })
	eddy.To(large, "large-payments", serde.String(), out)
	// eddy.New(topo, eddy.Config{...}) and Run as usual.

	b, err := out.Serialize(nil, &testpb.Payment{Id: "p1", Amount: 1500})
	if err != nil {
		log.Fatal(err)
	}
	p, err := in.Deserialize(b)
	fmt.Println(out.Subject(), b[0], b[5], p.GetId(), p.GetAmount(), err)
	// Output: large-payments-value 0 0 p1 1500 <nil>
}
