package jsonschema_test

import (
	"context"
	"fmt"
	"log"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/jsonschema"
	"github.com/eddy-streams/eddy/serde/registry"
)

type Payment struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
}

// An app reading JSON payments validated against their writer schema and
// writing the large ones, each validated before it is produced.
func Example() {
	fake := srfake.New() // in an app: the registry's URL
	defer fake.Close()
	reg, err := registry.New(registry.Config{URLs: []string{fake.URL()}})
	if err != nil {
		log.Fatal(err)
	}
	const schema = `{"title":"bank.Payment","type":"object","required":["id","amount"],
		"properties":{"id":{"type":"string"},"amount":{"type":"integer","minimum":0}}}`
	in, err := jsonschema.Value[Payment](reg, "payments", schema, jsonschema.WithValidateOnRead())
	if err != nil {
		log.Fatal(err)
	}
	out, err := jsonschema.Value[Payment](reg, "large-payments", schema)
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
	fmt.Println(out.Subject(), string(b[5:]), p, err)
	_, err = out.Serialize(nil, Payment{ID: "p2", Amount: -1})
	fmt.Println(err != nil)
	// Output:
	// large-payments-value {"id":"p1","amount":1500} {p1 1500} <nil>
	// true
}
