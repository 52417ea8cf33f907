package eddy_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/avro"
	"github.com/eddy-streams/eddy/serde/registry"
)

const avroPayment = `{"type":"record","name":"Payment","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"}]}`

type avroPaymentRecord struct {
	ID     string `avro:"id"`
	Amount int64  `avro:"amount"`
}

// avroDriver runs in (Avro values) → "id:amount" → out (strings), with
// the registry at url.
func avroDriver(t *testing.T, url string, cfg eddy.Config) (*eddytest.Driver, *avro.Serde[avroPaymentRecord]) {
	t.Helper()
	reg, err := registry.New(registry.Config{URLs: []string{url}, Timeout: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	payments, err := avro.Value[avroPaymentRecord](reg, "in", avroPayment)
	if err != nil {
		t.Fatal(err)
	}
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), payments)
	eddy.To(eddy.MapValues(in, func(_ string, p avroPaymentRecord) string { return fmt.Sprintf("%s:%d", p.ID, p.Amount) }),
		"out", serde.String(), serde.String())
	d, err := eddytest.New(topo, eddytest.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, payments
}

// TestAvroBadRecordIsDeadLettered: a record of an Avro topic that is not
// Confluent-framed Avro goes to the dead-letter topic with the reason;
// the good ones go through.
func TestAvroBadRecordIsDeadLettered(t *testing.T) {
	f := srfake.New()
	defer f.Close()
	d, payments := avroDriver(t, f.URL(), eddy.Config{})
	good, err := payments.Serialize(nil, avroPaymentRecord{ID: "p1", Amount: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.PipeRaw("in", []byte("k"), good, 1); err != nil {
		t.Fatal(err)
	}
	if err := d.PipeRaw("in", []byte("k"), []byte(`{"id":"p2","amount":6}`), 2); err != nil {
		t.Fatal(err)
	}
	if got := values(t, d, "out"); len(got) != 1 || got[0] != "p1:5" {
		t.Fatalf("out %v, want the good record only", got)
	}
	dlq, err := eddytest.Output(d, eddy.DeadLetterTopic("in"), serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(dlq) != 1 || !strings.Contains(dlqError(dlq[0].Headers), "eddy: avro: magic byte 0x7b, not 0") {
		t.Fatalf("dead letters %+v, want the JSON record with the reason in %s", dlq, eddy.HeaderDLQError)
	}
}

// TestUnavailableRegistryStopsTheApp: a registry that cannot be reached
// is not the record's fault: whatever the decode policy, the record is
// neither dead-lettered nor skipped, and the error that stops the app
// names the registry.
func TestUnavailableRegistryStopsTheApp(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	// A framed record of schema id 1, which only the registry knows.
	framed := []byte{0, 0, 0, 0, 1, 4, 'p', '1', 10}
	for _, policy := range []eddy.ErrorPolicy{eddy.DeadLetter, eddy.LogAndContinue} {
		t.Run(policy.String(), func(t *testing.T) {
			d, _ := avroDriver(t, url, eddy.Config{OnDecodeError: policy})
			err := d.PipeRaw("in", []byte("k"), framed, 1)
			if !errors.Is(err, serde.ErrUnavailable) || !strings.HasPrefix(err.Error(), "eddy: ") || !strings.Contains(err.Error(), url) {
				t.Fatalf("PipeRaw = %v; want an eddy: error wrapping serde.ErrUnavailable naming %s", err, url)
			}
			if n := eddytest.Output(d, eddy.DeadLetterTopic("in"), serde.Bytes(), serde.Bytes()).Len(); n != 0 {
				t.Fatalf("%d dead letters, want none", n)
			}
			if n := eddytest.Output(d, "out", serde.Bytes(), serde.Bytes()).Len(); n != 0 {
				t.Fatalf("%d outputs, want none", n)
			}
		})
	}
}

// TestUnavailableRegistryOnSinkIsNotDeadLettered: an output that cannot be
// encoded because the registry is down is not dead-lettered either.
func TestUnavailableRegistryOnSinkIsNotDeadLettered(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	reg, err := registry.New(registry.Config{URLs: []string{url}, Timeout: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	out, err := avro.Value[string](reg, "out", `"string"`)
	if err != nil {
		t.Fatal(err)
	}
	topo := eddy.NewTopology()
	eddy.To(eddy.Source(topo, "in", serde.String(), serde.String()), "out", serde.String(), out)
	d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{OnProcessError: eddy.DeadLetter}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = eddytest.Input(d, "in", serde.String(), serde.String()).Pipe("k", "v", 1)
	if !errors.Is(err, serde.ErrUnavailable) {
		t.Fatalf("Pipe = %v; want serde.ErrUnavailable", err)
	}
	if n := eddytest.Output(d, eddy.DeadLetterTopic("in"), serde.Bytes(), serde.Bytes()).Len(); n != 0 {
		t.Fatalf("%d dead letters, want none", n)
	}
}

// dlqError is a dead letter's eddy.error header.
func dlqError(hs []eddy.Header) string {
	for _, h := range hs {
		if h.Key == eddy.HeaderDLQError {
			return string(h.Value)
		}
	}
	return ""
}
