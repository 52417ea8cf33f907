package avro_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/avro"
	"github.com/eddy-streams/eddy/serde/registry"
)

// TestEvolutionRun is issue 18's acceptance test of schema evolution, run
// as a deployment runs it (the embedded broker, eddy's registry, two eddy
// apps under Run), not as serde calls: payments written with schema v1,
// then with v2 (a currency added with the default "EUR"), to one topic,
// are read by a topology compiled with v2 and by one compiled with v1.
// Read back read_committed, the v2 app's output has the default currency
// on every v1 record and the written one on every v2 record; the v1 app's
// (generic records, so a field it did not drop would show) has exactly id
// and amount on every record; both have every payment once, ids and
// amounts exact. Two records that are not payments (plain JSON, an
// unknown schema id) are decode errors: each app dead-letters them with
// the reason in eddy.error, and goes on.
func TestEvolutionRun(t *testing.T) {
	const v1Count, v2Count = 60, 40
	addr := startBroker(t)
	url := eddyRegistry(t)
	const in, outV1, outV2 = "payments", "payments-read-v1", "payments-read-v2"
	createTopics(t, addr, 4, in, outV1, outV2, eddy.DeadLetterTopic(in))

	// The producers: an old deployment writing v1, then a new one writing v2.
	type payment struct {
		id       string
		amount   int64
		currency string // "" for a v1 record
	}
	var payments []payment
	var recs []*kgo.Record
	w1 := must(avro.Value[PaymentV1](newClient(t, url, registry.Config{}), in, paymentV1))(t)
	for i := range v1Count {
		p := payment{id: fmt.Sprintf("p%03d", i), amount: int64(i)*1_000_000_007 - 500}
		payments = append(payments, p)
		recs = append(recs, &kgo.Record{Key: []byte(p.id), Value: must(w1.Serialize(nil, PaymentV1{ID: p.id, Amount: p.amount}))(t)})
	}
	w2 := must(avro.Value[PaymentV2](newClient(t, url, registry.Config{}), in, paymentV2))(t)
	currencies := []string{"USD", "GBP", "CHF", "JPY"}
	for i := range v2Count {
		p := payment{id: fmt.Sprintf("p%03d", v1Count+i), amount: -int64(i) * 999_999_937, currency: currencies[i%len(currencies)]}
		payments = append(payments, p)
		recs = append(recs, &kgo.Record{Key: []byte(p.id), Value: must(w2.Serialize(nil, PaymentV2{ID: p.id, Amount: p.amount, Currency: p.currency}))(t)})
	}
	produce(t, addr, in, recs...)
	// Not payments: plain JSON, and a record framed with an id the
	// registry never gave.
	produce(t, addr, in,
		&kgo.Record{Key: []byte("json"), Value: []byte(`{"id":"x","amount":1}`)},
		&kgo.Record{Key: []byte("unknown"), Value: append([]byte{0, 0, 0, 0x30, 0x39}, recs[0].Value[5:]...)})

	srcl := must(sr.NewClient(sr.URLs(url)))(t)
	if versions := must(srcl.SubjectVersions(context.Background(), "payments-value"))(t); !slices.Equal(versions, []int{1, 2}) {
		t.Fatalf("subject payments-value has versions %v, want [1 2]", versions)
	}

	// The v1 app reads generic records: the fields its schema resolves to
	// are the map's keys.
	topoV1 := eddy.NewTopology()
	r1 := must(avro.Value[map[string]any](newClient(t, url, registry.Config{}), in, paymentV1))(t)
	eddy.To(eddy.MapValues(eddy.Source(topoV1, in, serde.String(), r1), renderFields), outV1, serde.String(), serde.String())
	appV1 := run(t, topoV1, appConfig(t, addr, "evolution-v1"))

	topoV2 := eddy.NewTopology()
	r2 := must(avro.Value[PaymentV2](newClient(t, url, registry.Config{}), in, paymentV2))(t)
	eddy.To(eddy.Source(topoV2, in, serde.String(), r2), outV2, serde.String(), serde.JSON[PaymentV2]())
	appV2 := run(t, topoV2, appConfig(t, addr, "evolution-v2"))

	total := v1Count + v2Count
	waitRecords(t, addr, outV1, total, appV1)
	waitRecords(t, addr, outV2, total, appV2)
	waitRecords(t, addr, eddy.DeadLetterTopic(in), 4, nil)
	// Stopped, so that a duplicate written late is read below too.
	for _, app := range []*running{appV1, appV2} {
		if err := app.stop(t); err != nil {
			t.Fatalf("Run: %v", err)
		}
	}

	wantV1 := map[string]string{}
	wantV2 := map[string]PaymentV2{}
	for _, p := range payments {
		wantV1[p.id] = fmt.Sprintf("amount=%d id=%s", p.amount, p.id)
		currency := p.currency
		if currency == "" {
			currency = "EUR" // v2's default
		}
		wantV2[p.id] = PaymentV2{ID: p.id, Amount: p.amount, Currency: currency}
	}
	gotV1 := map[string]string{}
	for _, r := range readAll(t, addr, outV1) {
		if _, dup := gotV1[string(r.Key)]; dup {
			t.Errorf("v1 reader: %s output twice", r.Key)
		}
		gotV1[string(r.Key)] = string(r.Value)
	}
	gotV2 := map[string]PaymentV2{}
	for _, r := range readAll(t, addr, outV2) {
		if _, dup := gotV2[string(r.Key)]; dup {
			t.Errorf("v2 reader: %s output twice", r.Key)
		}
		p := must(serde.JSON[PaymentV2]().Deserialize(r.Value))(t)
		gotV2[string(r.Key)] = p
	}
	for _, p := range payments {
		if got, want := gotV1[p.id], wantV1[p.id]; got != want {
			t.Errorf("v1 reader, %s (written with v%d): %q, want %q", p.id, version(p.currency), got, want)
		}
		if got, want := gotV2[p.id], wantV2[p.id]; got != want {
			t.Errorf("v2 reader, %s (written with v%d): %+v, want %+v", p.id, version(p.currency), got, want)
		}
	}
	if len(gotV1) != total || len(gotV2) != total {
		t.Errorf("outputs hold %d (v1 reader) and %d (v2 reader) payments, want %d each", len(gotV1), len(gotV2), total)
	}

	// Each app dead-lettered each of the two records, naming why.
	reasons := map[string]int{}
	for _, r := range readAll(t, addr, eddy.DeadLetterTopic(in)) {
		msg := headerValue(r, eddy.HeaderDLQError)
		switch {
		case string(r.Key) == "json" && strings.Contains(msg, "looks like plain JSON"):
			reasons["json"]++
		case string(r.Key) == "unknown" && strings.Contains(msg, "writer schema id 12345 unknown to the registry"):
			reasons["unknown"]++
		default:
			t.Errorf("dead letter %s: eddy.error %q, eddy.stage %q", r.Key, msg, headerValue(r, eddy.HeaderDLQStage))
		}
	}
	if reasons["json"] != 2 || reasons["unknown"] != 2 {
		t.Errorf("dead letters: %v, want each of json and unknown twice (once per app)", reasons)
	}
}

// renderFields renders a generic record's fields, sorted by name.
func renderFields(_ string, m map[string]any) string {
	fields := make([]string, 0, len(m))
	for k, v := range m {
		fields = append(fields, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(fields)
	return strings.Join(fields, " ")
}

// version is the schema version a test payment was written with.
func version(currency string) int {
	if currency == "" {
		return 1
	}
	return 2
}
