package jsonschema_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eddy-streams/eddy/serde/jsonschema"
	"github.com/eddy-streams/eddy/serde/registry"
)

// benchRegistry is an in-process registry counting its requests; the
// benchmarks report them per record ("requests/op", expected 0).
func benchRegistry(b *testing.B) (*registry.Client, *atomic.Int64) {
	f := srfake.New()
	b.Cleanup(f.Close)
	var n atomic.Int64
	f.Intercept(func(http.ResponseWriter, *http.Request) bool { n.Add(1); return false })
	return newClient(b, f.URL(), registry.Config{}), &n
}

func benchDeserialize(b *testing.B, opts ...jsonschema.Option) {
	reg, requests := benchRegistry(b)
	s := must(jsonschema.Value[PaymentV1](reg, "payments", paymentV1, opts...))(b)
	rec := must(s.Serialize(nil, PaymentV1{ID: "payment-000001", Amount: 4200}))(b)
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

func BenchmarkDeserialize(b *testing.B) { benchDeserialize(b) }

func BenchmarkDeserializeValidating(b *testing.B) {
	benchDeserialize(b, jsonschema.WithValidateOnRead())
}

func BenchmarkSerialize(b *testing.B) {
	reg, requests := benchRegistry(b)
	s := must(jsonschema.Value[PaymentV1](reg, "payments", paymentV1))(b)
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
