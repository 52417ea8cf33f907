package avro_test

import (
	"context"
	"fmt"
	"log"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/avro"
	"github.com/eddy-streams/eddy/serde/registry"
)

type Payment struct {
	ID     string `avro:"id"`
	Amount int64  `avro:"amount"`
}

// An app reading and writing Avro payments through a schema registry.
// Check, called before the app runs, registers the output's schema: a
// registry that refuses it (incompatible with the subject's versions)
// stops the app at start, with the registry's message.
func Example() {
	fake := srfake.New() // in an app: the registry's URL
	defer fake.Close()
	reg, err := registry.New(registry.Config{URLs: []string{fake.URL()}})
	if err != nil {
		log.Fatal(err)
	}
	const schema = `{"type":"record","name":"Payment","namespace":"bank","fields":[
		{"name":"id","type":"string"},{"name":"amount","type":"long"}]}`
	in, err := avro.Value[Payment](reg, "payments", schema)
	if err != nil {
		log.Fatal(err)
	}
	out, err := avro.Value[Payment](reg, "large-payments", schema)
	if err != nil {
		log.Fatal(err)
	}
	if err := out.Check(context.Background()); err != nil {
		log.Fatal(err) // before eddy.New: the app fails at start
	}

	topo := eddy.NewTopology()
	payments := eddy.Source(topo, "payments", serde.String(), in)
	large := eddy.Filter(payments, func(_ string, p Payment) bool { return p.Amount >= 1000 })
	eddy.To(large, "large-payments", serde.String(), out)
	// eddy.New(topo, eddy.Config{...}) and Run as usual.

	b, err := out.Serialize(nil, Payment{ID: "p1", Amount: 1500})
	if err != nil {
		log.Fatal(err)
	}
	p, err := in.Deserialize(b)
	fmt.Println(out.Subject(), b[0], p, err)
	// Output: large-payments-value 0 {p1 1500} <nil>
}
