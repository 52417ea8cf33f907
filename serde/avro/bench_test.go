package avro_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eddy-streams/eddy/serde/avro"
	"github.com/eddy-streams/eddy/serde/registry"
)

// benchRegistry is an in-process registry counting its requests; the
// benchmarks report them per record ("requests/op", expected 0: only the
// first record of an id asks the registry).
func benchRegistry(b *testing.B) (*registry.Client, *atomic.Int64) {
	f := srfake.New()
	b.Cleanup(f.Close)
	var n atomic.Int64
	f.Intercept(func(http.ResponseWriter, *http.Request) bool { n.Add(1); return false })
	return newClient(b, f.URL(), registry.Config{}), &n
}

func BenchmarkDeserializeStruct(b *testing.B) {
	reg, requests := benchRegistry(b)
	v1 := must(avro.Value[PaymentV1](reg, "payments", paymentV1))(b)
	rec := must(v1.Serialize(nil, PaymentV1{ID: "payment-000001", Amount: 4200}))(b)
	// Read with the newer schema: the resolution path, a default filled.
	s := must(avro.Value[PaymentV2](newClient(b, reg.URL(), registry.Config{}), "payments", paymentV2))(b)
	must(s.Deserialize(rec))(b) // the id's first record: one request
	before := requests.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Deserialize(rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(requests.Load()-before)/float64(b.N), "requests/op")
}

func BenchmarkDeserializeMap(b *testing.B) {
	reg, requests := benchRegistry(b)
	s := must(avro.Value[map[string]any](reg, "payments", paymentV1))(b)
	rec := must(s.Serialize(nil, map[string]any{"id": "payment-000001", "amount": int64(4200)}))(b)
	must(s.Deserialize(rec))(b)
	before := requests.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Deserialize(rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(requests.Load()-before)/float64(b.N), "requests/op")
}

func BenchmarkSerializeStruct(b *testing.B) {
	reg, requests := benchRegistry(b)
	s := must(avro.Value[PaymentV1](reg, "payments", paymentV1))(b)
	v := PaymentV1{ID: "payment-000001", Amount: 4200}
	buf := must(s.Serialize(nil, v))(b)
	before := requests.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var err error
		if buf, err = s.Serialize(buf[:0], v); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(requests.Load()-before)/float64(b.N), "requests/op")
}
