package jsonschema_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eddy-streams/eddy/internal/testutil/registrytest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/jsonschema"
	"github.com/eddy-streams/eddy/serde/registry"
)

const paymentV1 = `{"title":"bank.Payment","type":"object","properties":{
	"id":{"type":"string","minLength":1},
	"amount":{"type":"integer","minimum":0}},
	"required":["id","amount"]}`

// paymentV2 adds an optional property: a v1 reader reads its records.
const paymentV2 = `{"title":"bank.Payment","type":"object","properties":{
	"id":{"type":"string","minLength":1},
	"amount":{"type":"integer","minimum":0},
	"currency":{"type":"string"}},
	"required":["id","amount"]}`

type PaymentV1 struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
}

type PaymentV2 struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency,omitempty"`
}

type fake struct {
	*srfake.Registry
	requests atomic.Int64
}

func newFake(t testing.TB, opts ...srfake.Option) *fake {
	t.Helper()
	f := &fake{Registry: srfake.New(opts...)}
	f.Intercept(func(http.ResponseWriter, *http.Request) bool {
		f.requests.Add(1)
		return false
	})
	t.Cleanup(f.Close)
	return f
}

func newClient(t testing.TB, url string, cfg registry.Config) *registry.Client {
	t.Helper()
	cfg.URLs = []string{url}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c, err := registry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// must returns v, or fails the test given to it with err.
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestRoundTrip(t *testing.T) {
	f := newFake(t)
	reg := newClient(t, f.URL(), registry.Config{})
	s := must(jsonschema.Value[PaymentV1](reg, "payments", paymentV1))(t)
	in := PaymentV1{ID: "p1", Amount: 42}
	b := must(s.Serialize([]byte("kept"), in))(t)
	if string(b[:4]) != "kept" {
		t.Fatalf("Serialize did not append to dst: %q", b)
	}
	b = b[4:]
	ss, ok := f.GetSchema("payments-value", 1)
	if !ok || ss.Type != sr.TypeJSON {
		t.Fatalf("schema not registered as JSON under payments-value: %+v", ss)
	}
	if id, payload, err := registry.SplitHeader(b); err != nil || id != ss.ID || string(payload) != `{"id":"p1","amount":42}` {
		t.Fatalf("record %q: id %d (registered %d), %v", b, id, ss.ID, err)
	}
	out := must(s.Deserialize(b))(t)
	if out != in {
		t.Fatalf("round trip: %+v", out)
	}
	generic := must(jsonschema.Key[map[string]any](reg, "payments", paymentV1))(t)
	m := must(generic.Deserialize(must(generic.Serialize(nil, map[string]any{"id": "k", "amount": 1}))(t)))(t)
	if m["id"] != "k" || generic.Subject() != "payments-key" {
		t.Fatalf("generic key round trip: %v under %s", m, generic.Subject())
	}
}

func TestSerializeValidates(t *testing.T) {
	f := newFake(t)
	reg := newClient(t, f.URL(), registry.Config{})
	s := must(jsonschema.Value[PaymentV1](reg, "payments", paymentV1))(t)
	b, err := s.Serialize([]byte("kept"), PaymentV1{ID: "", Amount: -1})
	if err == nil || !strings.HasPrefix(err.Error(), "eddy: jsonschema: ") || !strings.Contains(err.Error(), "does not match the schema") ||
		!strings.Contains(err.Error(), "minLength") || !strings.Contains(err.Error(), "minimum") {
		t.Fatalf("Serialize of an invalid value = %v", err)
	}
	if string(b) != "kept" {
		t.Fatalf("Serialize left %q in dst after an error", b)
	}
	// A map missing a required property.
	m := must(jsonschema.Value[map[string]any](reg, "payments", paymentV1))(t)
	if _, err := m.Serialize(nil, map[string]any{"id": "x"}); err == nil || !strings.Contains(err.Error(), "amount") {
		t.Fatalf("Serialize without a required property = %v", err)
	}
	// Strict encoding: invalid UTF-8 is refused, as serde.JSON's.
	if _, err := s.Serialize(nil, PaymentV1{ID: "\xff"}); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("Serialize of invalid UTF-8 = %v", err)
	}
}

func TestValidateOnRead(t *testing.T) {
	f := newFake(t)
	reg := newClient(t, f.URL(), registry.Config{})
	s := must(jsonschema.Value[PaymentV1](reg, "payments", paymentV1))(t)
	good := must(s.Serialize(nil, PaymentV1{ID: "p1", Amount: 1}))(t)
	// A producer that did not validate: negative amount, id 1 as above.
	bad := append(good[:5:5], `{"id":"p1","amount":-5}`...)
	if got := must(s.Deserialize(bad))(t); got.Amount != -5 {
		t.Fatalf("without validation: %+v", got)
	}
	v := must(jsonschema.Value[PaymentV1](reg, "payments", paymentV1, jsonschema.WithValidateOnRead()))(t)
	_, err := v.Deserialize(bad)
	if err == nil || !strings.HasPrefix(err.Error(), "eddy: jsonschema: ") || !strings.Contains(err.Error(), "does not match writer schema id") || errors.Is(err, serde.ErrUnavailable) {
		t.Fatalf("validating Deserialize of an invalid document = %v", err)
	}
	t.Log(err)
	if got := must(v.Deserialize(good))(t); got != (PaymentV1{ID: "p1", Amount: 1}) {
		t.Fatalf("validating Deserialize: %+v", got)
	}
}

func TestEvolution(t *testing.T) {
	reg := newClient(t, newFake(t).URL(), registry.Config{})
	v1 := must(jsonschema.Value[PaymentV1](reg, "payments", paymentV1, jsonschema.WithValidateOnRead()))(t)
	v2 := must(jsonschema.Value[PaymentV2](reg, "payments", paymentV2, jsonschema.WithValidateOnRead()))(t)
	old := must(v1.Serialize(nil, PaymentV1{ID: "old", Amount: 1}))(t)
	young := must(v2.Serialize(nil, PaymentV2{ID: "new", Amount: 2, Currency: "USD"}))(t)
	if old[4] == young[4] {
		t.Fatalf("v1 and v2 share id %d", old[4])
	}
	if got := must(v1.Deserialize(young))(t); got != (PaymentV1{ID: "new", Amount: 2}) {
		t.Fatalf("old reader, new record: %+v", got)
	}
	if got := must(v2.Deserialize(old))(t); got != (PaymentV2{ID: "old", Amount: 1}) {
		t.Fatalf("new reader, old record: %+v", got)
	}
}

func TestWriterOptions(t *testing.T) {
	reg := newClient(t, newFake(t).URL(), registry.Config{})
	off := must(jsonschema.Value[PaymentV1](reg, "payments", paymentV1, jsonschema.WithWriter(registry.WithoutAutoRegister())))(t)
	if err := off.Check(context.Background()); !errors.Is(err, registry.ErrNotRegistered) {
		t.Fatalf("Check with auto-register off = %v", err)
	}
	if err := must(jsonschema.Value[PaymentV2](reg, "payments", paymentV2))(t).Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	latest := must(jsonschema.Value[PaymentV1](reg, "payments", paymentV1, jsonschema.WithWriter(registry.WithLatestVersion())))(t)
	b := must(latest.Serialize(nil, PaymentV1{ID: "l", Amount: 3}))(t)
	if id, _, _ := registry.SplitHeader(b); id != must(reg.Latest(context.Background(), "payments-value"))(t).ID {
		t.Fatalf("use-latest wrote id %d", id)
	}
	named := must(jsonschema.Value[PaymentV1](reg, "payments", paymentV1, jsonschema.WithWriter(registry.WithSubjectNameStrategy(registry.RecordName))))(t)
	if named.Subject() != "bank.Payment" {
		t.Fatalf("RecordName subject %q: want the schema's title", named.Subject())
	}
}

func TestInvalidSchema(t *testing.T) {
	reg := newClient(t, newFake(t).URL(), registry.Config{})
	for _, schema := range []string{`{"type":12}`, `{`, `{"$ref":"file:///etc/passwd"}`} {
		if _, err := jsonschema.Value[any](reg, "t", schema); err == nil || !strings.HasPrefix(err.Error(), "eddy: jsonschema: ") {
			t.Fatalf("Value with schema %s = %v", schema, err)
		}
	}
}

func TestCache(t *testing.T) {
	f := newFake(t)
	writer := newClient(t, f.URL(), registry.Config{})
	v1 := must(jsonschema.Value[PaymentV1](writer, "payments", paymentV1))(t)
	v2 := must(jsonschema.Value[PaymentV2](writer, "payments", paymentV2))(t)
	r1 := must(v1.Serialize(nil, PaymentV1{ID: "a"}))(t)
	r2 := must(v2.Serialize(nil, PaymentV2{ID: "b"}))(t)

	reader := must(jsonschema.Value[PaymentV2](newClient(t, f.URL(), registry.Config{}), "payments", paymentV2, jsonschema.WithValidateOnRead()))(t)
	before := f.requests.Load()
	for range 100 {
		must(reader.Deserialize(r1))(t)
	}
	if got := f.requests.Load() - before; got != 1 {
		t.Fatalf("100 records of one id made %d registry requests, want 1", got)
	}
	for range 100 {
		must(reader.Deserialize(r2))(t)
		must(reader.Deserialize(r1))(t)
	}
	if got := f.requests.Load() - before; got != 2 {
		t.Fatalf("records of two ids made %d registry requests, want 2", got)
	}
	before = f.requests.Load()
	for range 100 {
		must(v1.Serialize(nil, PaymentV1{ID: "c"}))(t)
	}
	if got := f.requests.Load() - before; got != 0 {
		t.Fatalf("100 Serialize calls after the first made %d registry requests, want 0", got)
	}
}

func TestBadInput(t *testing.T) {
	reg := newClient(t, newFake(t).URL(), registry.Config{})
	s := must(jsonschema.Value[PaymentV1](reg, "payments", paymentV1, jsonschema.WithValidateOnRead()))(t)
	good := must(s.Serialize(nil, PaymentV1{ID: "p1", Amount: 42}))(t)
	avro := must(reg.Register(context.Background(), "avro-value", sr.Schema{Schema: `"string"`, Type: sr.TypeAvro}))(t)
	with := func(head []byte, tail ...byte) []byte { return append(append([]byte(nil), head...), tail...) }
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"magic byte 1", with([]byte{1}, good[1:]...), "magic byte 0x01, not 0"},
		{"unknown id", with([]byte{0, 0, 0, 0x30, 0x39}, good[5:]...), "writer schema id 12345 unknown to the registry"},
		{"plain JSON", []byte(`{"id":"p1","amount":42}`), "looks like plain JSON"},
		{"truncated", good[:len(good)-2], "writer schema id"},
		{"wrong type", with(good[:5], []byte(`{"id":"p1","amount":"42"}`)...), "does not match writer schema id"},
		{"an Avro schema id", with(registry.AppendHeader(nil, avro), []byte(`"x"`)...), "is AVRO, not JSON"},
		{"empty", nil, "shorter than the 5-byte Confluent header"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Deserialize(c.b)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "eddy: jsonschema: ") {
				t.Fatalf("Deserialize(%q) = %v; want an error with %q", c.b, err, c.want)
			}
			if errors.Is(err, serde.ErrUnavailable) {
				t.Fatalf("bad input counted as unavailability: %v", err)
			}
		})
	}
}

func TestRegistryDown(t *testing.T) {
	reg := newClient(t, registrytest.ClosedURL(t), registry.Config{Timeout: 300 * time.Millisecond})
	s := must(jsonschema.Value[PaymentV1](reg, "payments", paymentV1))(t)
	if _, err := s.Deserialize([]byte("\x00\x00\x00\x00\x01{}")); !errors.Is(err, serde.ErrUnavailable) {
		t.Fatalf("Deserialize with the registry down = %v", err)
	}
	if _, err := s.Serialize(nil, PaymentV1{ID: "p"}); !errors.Is(err, serde.ErrUnavailable) {
		t.Fatalf("Serialize with the registry down = %v", err)
	}
}

func TestCredentialsRefused(t *testing.T) {
	f := newFake(t, srfake.WithAuth("Bearer right"))
	reg := newClient(t, f.URL(), registry.Config{BearerToken: "wrong", Timeout: 300 * time.Millisecond})
	s := must(jsonschema.Value[PaymentV1](reg, "payments", paymentV1))(t)
	if err := s.Check(context.Background()); !errors.Is(err, serde.ErrUnavailable) || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("Check with a wrong token = %v", err)
	}
}

// TestConcurrentDecode: records of two ids decoded and validated at once
// by many goroutines, with the cache empty (run with -race).
func TestConcurrentDecode(t *testing.T) {
	f := newFake(t)
	writer := newClient(t, f.URL(), registry.Config{})
	r1 := must(must(jsonschema.Value[PaymentV1](writer, "payments", paymentV1))(t).Serialize(nil, PaymentV1{ID: "a", Amount: 1}))(t)
	r2 := must(must(jsonschema.Value[PaymentV2](writer, "payments", paymentV2))(t).Serialize(nil, PaymentV2{ID: "b", Currency: "USD"}))(t)
	reader := must(jsonschema.Value[PaymentV2](newClient(t, f.URL(), registry.Config{}), "payments", paymentV2, jsonschema.WithValidateOnRead()))(t)
	before := f.requests.Load()
	errs := make(chan error, 16)
	for g := range 16 {
		go func() {
			var err error
			for i := range 50 {
				rec := r1
				if (g+i)%2 == 0 {
					rec = r2
				}
				if _, e := reader.Deserialize(rec); e != nil {
					err = e
				}
			}
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := f.requests.Load() - before; got != 2 {
		t.Fatalf("%d registry requests for two ids, want 2", got)
	}
}
