package protobuf_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/schemaregistry"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/avro"
	"github.com/eddy-streams/eddy/serde/protobuf"
	pb "github.com/eddy-streams/eddy/serde/protobuf/internal/testpb"
	"github.com/eddy-streams/eddy/serde/registry"
)

// Payment is an Avro payment, as the README's example reads it.
type Payment struct {
	ID     string `avro:"id"`
	Amount int64  `avro:"amount"`
}

const paymentAvsc = `{"type":"record","name":"Payment","namespace":"bank","fields":[
	{"name":"id","type":"string"},{"name":"amount","type":"long"}]}`

// A topology reading Avro payments and writing them as Protobuf messages,
// both through a schema registry: the README's ten lines, run here
// through eddytest with eddy's own registry in-process (in an app, the
// registry's URL and eddy.Run).
func Example_avroToProtobuf() {
	srv, err := schemaregistry.NewServer("") // in memory; `eddy broker --schema-registry` serves the same
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	web := httptest.NewServer(srv)
	defer web.Close()
	registryURL := web.URL
	ctx := context.Background()

	// The README's ten lines, with their error checks.
	reg, err := registry.New(registry.Config{URLs: []string{registryURL}})
	if err != nil {
		log.Fatal(err)
	}
	in, err := avro.Value[Payment](reg, "payments", paymentAvsc) // Avro in
	if err != nil {
		log.Fatal(err)
	}
	out, err := protobuf.Value[*pb.Payment](reg, "payments-pb") // Protobuf out
	if err != nil {
		log.Fatal(err)
	}
	if err := out.Check(ctx); err != nil { // registers payments-pb-value now: a refusal stops the app here
		log.Fatal(err)
	}
	t := eddy.NewTopology()
	payments := eddy.Source(t, "payments", serde.String(), in)
	converted := eddy.MapValues(payments, func(_ string, p Payment) *pb.Payment {
		return &pb.Payment{Id: p.ID, Amount: p.Amount}
	})
	eddy.To(converted, "payments-pb", serde.String(), out)

	d, err := eddytest.New(t, eddytest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	// Piped as an Avro producer writes them (the serde registers
	// payments-value), read back as a Protobuf consumer reads them.
	src := eddytest.Input(d, "payments", serde.String(), in)
	for _, p := range []Payment{{ID: "p1", Amount: 1500}, {ID: "p2", Amount: -20}} {
		if err := src.Pipe(p.ID, p, 0); err != nil {
			log.Fatal(err)
		}
	}
	raw, err := eddytest.Output(d, "payments-pb", serde.String(), serde.Bytes()).ReadAll()
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range raw {
		m, err := out.Deserialize(r.Value)
		if err != nil {
			log.Fatal(err)
		}
		// The Confluent framing: magic byte 0, the schema id (4 bytes),
		// the message index (0: the file's first message), the message.
		fmt.Printf("%s: magic %d, message index %d, id=%s amount=%d\n", r.Key, r.Value[0], r.Value[5], m.GetId(), m.GetAmount())
	}
	// What the serdes registered.
	cl, err := sr.NewClient(sr.URLs(registryURL))
	if err != nil {
		log.Fatal(err)
	}
	for _, subject := range []string{in.Subject(), out.Subject()} {
		s, err := cl.SchemaByVersion(ctx, subject, -1)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: version %d, %s\n", subject, s.Version, s.Type)
	}
	// Output:
	// p1: magic 0, message index 0, id=p1 amount=1500
	// p2: magic 0, message index 0, id=p2 amount=-20
	// payments-value: version 1, AVRO
	// payments-pb-value: version 1, PROTOBUF
}
