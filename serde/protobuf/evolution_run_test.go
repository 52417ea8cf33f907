package protobuf_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/protobuf"
	"github.com/eddy-streams/eddy/serde/protobuf/internal/testpb"
	"github.com/eddy-streams/eddy/serde/registry"
)

// TestEvolutionRun is issue 18's schema evolution run for Protobuf (the
// embedded broker, eddy's registry, an eddy app under Run): payments
// written with the generated Payment (v1), then by a newer producer whose
// Payment adds currency = 3 (v2, registered as version 2 of the subject),
// are copied by an app compiled with v1 to another topic. Read back
// read_committed with v2's descriptor, every payment is there once, id
// and amount exact; a v2 record still has its currency (the old reader
// kept it as an unknown field, and its Serialize wrote it back); a v1
// record has currency's zero value, as a v2 reader sees an old record.
// A record that is plain JSON, and one whose message indexes name
// another message of the file, are dead-lettered with the reason.
//
// The v2 side is a dynamic message, not a second generated type: two
// generated types of one full name (eddy.test.bank.Payment) cannot be
// linked into one test binary (protobuf-go's registry panics at init),
// and the serde reads generated types only.
func TestEvolutionRun(t *testing.T) {
	const v1Count, v2Count = 50, 30
	addr := startBroker(t)
	url := eddyRegistry(t)
	const in, out = "payments", "payments-copy"
	createTopics(t, addr, 4, in, out, eddy.DeadLetterTopic(in))

	type payment struct {
		id       string
		amount   int64
		currency string // "" for a v1 record
	}
	var payments []payment
	var recs []*kgo.Record
	w1 := must(protobuf.Value[*testpb.Payment](newClient(t, url, registry.Config{}), in))(t)
	for i := range v1Count {
		p := payment{id: fmt.Sprintf("p%03d", i), amount: int64(i)*1_000_000_007 - 500}
		payments = append(payments, p)
		recs = append(recs, &kgo.Record{Key: []byte(p.id), Value: must(w1.Serialize(nil, &testpb.Payment{Id: p.id, Amount: p.amount}))(t)})
	}
	// The newer producer registers v2 and frames its records as
	// Confluent's serializer does.
	newer := newClient(t, url, registry.Config{})
	text := paymentV2(t, newer)
	v2 := must(compile(text))(t).Messages().ByName("Payment")
	id := must(newer.Register(context.Background(), "payments-value", sr.Schema{Schema: text, Type: sr.TypeProtobuf}))(t)
	currencies := []string{"USD", "GBP", "CHF"}
	for i := range v2Count {
		p := payment{id: fmt.Sprintf("p%03d", v1Count+i), amount: -int64(i) * 999_999_937, currency: currencies[i%len(currencies)]}
		payments = append(payments, p)
		m := dynamicpb.NewMessage(v2)
		m.Set(v2.Fields().ByName("id"), protoreflect.ValueOfString(p.id))
		m.Set(v2.Fields().ByName("amount"), protoreflect.ValueOfInt64(p.amount))
		m.Set(v2.Fields().ByName("currency"), protoreflect.ValueOfString(p.currency))
		b := append(registry.AppendHeader(nil, id), 0)
		recs = append(recs, &kgo.Record{Key: []byte(p.id), Value: append(b, must(proto.Marshal(m))(t)...)})
	}
	produce(t, addr, in, recs...)
	// Not payments: plain JSON, and a v1 record whose indexes name the
	// file's second message (Refund).
	refund := slices.Clone(recs[0].Value)
	refund[registry.HeaderSize] = 2 // a count of 1 (zig-zag), then index 1
	refund = slices.Insert(refund, registry.HeaderSize+1, 2)
	produce(t, addr, in,
		&kgo.Record{Key: []byte("json"), Value: []byte(`{"id":"x","amount":1}`)},
		&kgo.Record{Key: []byte("refund"), Value: refund})

	srcl := must(sr.NewClient(sr.URLs(url)))(t)
	if versions := must(srcl.SubjectVersions(context.Background(), "payments-value"))(t); !slices.Equal(versions, []int{1, 2}) {
		t.Fatalf("subject payments-value has versions %v, want [1 2]", versions)
	}

	// The app compiled with v1: it copies each payment as it reads it.
	reg := newClient(t, url, registry.Config{})
	topo := eddy.NewTopology()
	src := must(protobuf.Value[*testpb.Payment](reg, in))(t)
	sink := must(protobuf.Value[*testpb.Payment](reg, out))(t)
	if err := sink.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	eddy.To(eddy.Source(topo, in, serde.String(), src), out, serde.String(), sink)
	app := run(t, topo, appConfig(t, addr, "evolution-protobuf"))
	total := v1Count + v2Count
	waitRecords(t, addr, out, total, app)
	waitRecords(t, addr, eddy.DeadLetterTopic(in), 2, app)
	if err := app.stop(t); err != nil { // so that a duplicate written late is read below too
		t.Fatalf("Run: %v", err)
	}

	got := map[string]payment{}
	for _, r := range readAll(t, addr, out) {
		if _, dup := got[string(r.Key)]; dup {
			t.Errorf("%s copied twice", r.Key)
		}
		if len(r.Value) < registry.HeaderSize+1 || r.Value[registry.HeaderSize] != 0 {
			t.Fatalf("%s: % x is not framed with the message index 0", r.Key, r.Value)
		}
		m := dynamicpb.NewMessage(v2) // a v2 reader
		if err := proto.Unmarshal(r.Value[registry.HeaderSize+1:], m); err != nil {
			t.Fatalf("%s: %v", r.Key, err)
		}
		got[string(r.Key)] = payment{
			id:       m.Get(v2.Fields().ByName("id")).String(),
			amount:   m.Get(v2.Fields().ByName("amount")).Int(),
			currency: m.Get(v2.Fields().ByName("currency")).String(),
		}
	}
	for _, p := range payments {
		version := 1
		if p.currency != "" {
			version = 2
		}
		if got[p.id] != p {
			t.Errorf("%s (written with v%d), copied by the v1 app, read with v2: %+v, want %+v", p.id, version, got[p.id], p)
		}
	}
	if len(got) != total {
		t.Errorf("%s holds %d payments, want %d", out, len(got), total)
	}

	reasons := map[string]string{}
	for _, r := range readAll(t, addr, eddy.DeadLetterTopic(in)) {
		reasons[string(r.Key)] = headerValue(r, eddy.HeaderDLQError)
	}
	if len(reasons) != 2 || !strings.Contains(reasons["json"], "looks like plain JSON") ||
		!strings.Contains(reasons["refund"], "name eddy.test.bank.Refund in writer schema id 1, not the serde's eddy.test.bank.Payment") {
		t.Errorf("dead letters (key: eddy.error): %q", reasons)
	}
}
