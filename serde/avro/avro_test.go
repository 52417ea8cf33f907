package avro_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eddy-streams/eddy/internal/testutil/registrytest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/avro"
	"github.com/eddy-streams/eddy/serde/registry"
)

const paymentV1 = `{"type":"record","name":"Payment","namespace":"bank","fields":[
	{"name":"id","type":"string"},
	{"name":"amount","type":"long"}]}`

// paymentV2 adds an optional field with a default: backward and forward
// compatible with v1.
const paymentV2 = `{"type":"record","name":"Payment","namespace":"bank","fields":[
	{"name":"id","type":"string"},
	{"name":"amount","type":"long"},
	{"name":"currency","type":"string","default":"EUR"}]}`

type PaymentV1 struct {
	ID     string `avro:"id"`
	Amount int64  `avro:"amount"`
}

type PaymentV2 struct {
	ID       string `avro:"id"`
	Amount   int64  `avro:"amount"`
	Currency string `avro:"currency"`
}

// fake is an in-process registry that counts the requests it serves.
type fake struct {
	*srfake.Registry
	requests atomic.Int64
}

func newFake(t *testing.T, opts ...srfake.Option) *fake { return newFakeTB(t, opts...) }

func newFakeTB(t testing.TB, opts ...srfake.Option) *fake {
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

func TestRoundTripStruct(t *testing.T) {
	f := newFake(t)
	reg := newClient(t, f.URL(), registry.Config{})
	s := must(avro.Value[PaymentV1](reg, "payments", paymentV1))(t)
	in := PaymentV1{ID: "p1", Amount: 42}
	prefix := []byte("kept")
	b := must(s.Serialize(prefix, in))(t)
	if string(b[:4]) != "kept" {
		t.Fatalf("Serialize did not append to dst: %q", b)
	}
	b = b[4:]
	if b[0] != 0 {
		t.Fatalf("magic byte %d", b[0])
	}
	ss, ok := f.GetSchema("payments-value", 1)
	if !ok {
		t.Fatal("schema not registered under payments-value")
	}
	if id := int(b[1])<<24 | int(b[2])<<16 | int(b[3])<<8 | int(b[4]); id != ss.ID {
		t.Fatalf("framed id %d, registered id %d", id, ss.ID)
	}
	out := must(s.Deserialize(b))(t)
	clear(b) // the runtime reuses its fetch buffers: out must not share b
	if out != in {
		t.Fatalf("round trip: %+v, want %+v", out, in)
	}
}

func TestRoundTripMap(t *testing.T) {
	f := newFake(t)
	reg := newClient(t, f.URL(), registry.Config{})
	s := must(avro.Value[map[string]any](reg, "payments", paymentV1))(t)
	in := map[string]any{"id": "p1", "amount": int64(42)}
	out := must(s.Deserialize(must(s.Serialize(nil, in))(t)))(t)
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip: %#v, want %#v", out, in)
	}
}

func TestKeySubject(t *testing.T) {
	f := newFake(t)
	reg := newClient(t, f.URL(), registry.Config{})
	s := must(avro.Key[string](reg, "payments", `"string"`))(t)
	out := must(s.Deserialize(must(s.Serialize(nil, "acct-1"))(t)))(t)
	if out != "acct-1" {
		t.Fatalf("key round trip: %q", out)
	}
	if !f.SubjectExists("payments-key") || s.Subject() != "payments-key" {
		t.Fatalf("subject %q; payments-key registered: %v", s.Subject(), f.SubjectExists("payments-key"))
	}
}

// TestEvolution: a record of the new schema read by an old reader (the
// new field skipped), and an old record read by a new reader (the
// default filled), through the same registry.
func TestEvolution(t *testing.T) {
	f := newFake(t)
	reg := newClient(t, f.URL(), registry.Config{})
	v1 := must(avro.Value[PaymentV1](reg, "payments", paymentV1))(t)
	v2 := must(avro.Value[PaymentV2](reg, "payments", paymentV2))(t)
	old := must(v1.Serialize(nil, PaymentV1{ID: "old", Amount: 1}))(t)
	young := must(v2.Serialize(nil, PaymentV2{ID: "new", Amount: 2, Currency: "USD"}))(t)
	if vs, ok := f.GetSchema("payments-value", 2); !ok || vs.Schema.Schema == "" {
		t.Fatal("v2 not registered as version 2 of payments-value")
	}

	if got := must(v2.Deserialize(old))(t); got != (PaymentV2{ID: "old", Amount: 1, Currency: "EUR"}) {
		t.Fatalf("new reader, old record: %+v; want the default currency", got)
	}
	if got := must(v1.Deserialize(young))(t); got != (PaymentV1{ID: "new", Amount: 2}) {
		t.Fatalf("old reader, new record: %+v", got)
	}
	// Generic records resolve too.
	g := must(avro.Value[map[string]any](reg, "payments", paymentV2))(t)
	if got := must(g.Deserialize(old))(t); got["currency"] != "EUR" {
		t.Fatalf("map reader, old record: %#v", got)
	}
}

func TestSubjectNameStrategies(t *testing.T) {
	for _, c := range []struct {
		name     string
		strategy registry.SubjectNameStrategy
		key      bool
		want     string
	}{
		{"topic", registry.TopicName, false, "payments-value"},
		{"topic key", registry.TopicName, true, "payments-key"},
		{"record", registry.RecordName, false, "bank.Payment"},
		{"topic record", registry.TopicRecordName, false, "payments-bank.Payment"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			reg := newClient(t, f.URL(), registry.Config{})
			build := avro.Value[PaymentV1]
			if c.key {
				build = avro.Key[PaymentV1]
			}
			s := must(build(reg, "payments", paymentV1, registry.WithSubjectNameStrategy(c.strategy)))(t)
			if err := s.Check(context.Background()); err != nil {
				t.Fatal(err)
			}
			if s.Subject() != c.want || !f.SubjectExists(c.want) {
				t.Fatalf("subject %q, want %q registered (registered: %v)", s.Subject(), c.want, f.SubjectExists(c.want))
			}
		})
	}
	f := newFake(t)
	reg := newClient(t, f.URL(), registry.Config{})
	if _, err := avro.Value[string](reg, "payments", `"string"`, registry.WithSubjectNameStrategy(registry.RecordName)); err == nil ||
		!strings.Contains(err.Error(), "RecordNameStrategy needs a named schema") {
		t.Fatalf("RecordName on a primitive: %v", err)
	}
}

func TestAutoRegisterOff(t *testing.T) {
	f := newFake(t)
	reg := newClient(t, f.URL(), registry.Config{})
	s := must(avro.Value[PaymentV1](reg, "payments", paymentV1, registry.WithoutAutoRegister()))(t)
	_, err := s.Serialize(nil, PaymentV1{ID: "p"})
	if !errors.Is(err, registry.ErrNotRegistered) || !strings.Contains(err.Error(), `not registered under subject "payments-value" and auto-register is off`) {
		t.Fatalf("Serialize with the subject missing = %v", err)
	}
	if errors.Is(err, serde.ErrUnavailable) {
		t.Fatalf("a missing subject is not unavailability: %v", err)
	}
	if f.SubjectExists("payments-value") {
		t.Fatal("auto-register off registered the schema")
	}
	// Registered by someone else: the lookup finds its id (in a new
	// serde: the refusal is kept, so that a record does not ask again).
	id, _, err := f.RegisterSchema("payments-value", sr.Schema{Schema: paymentV1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Serialize(nil, PaymentV1{ID: "p"}); !errors.Is(err, registry.ErrNotRegistered) {
		t.Fatalf("Serialize after the refusal = %v; want the refusal kept", err)
	}
	s = must(avro.Value[PaymentV1](reg, "payments", paymentV1, registry.WithoutAutoRegister()))(t)
	b := must(s.Serialize(nil, PaymentV1{ID: "p"}))(t)
	if got := int(b[4]); got != id {
		t.Fatalf("framed id %d, registered %d", got, id)
	}
}

func TestUseLatest(t *testing.T) {
	f := newFake(t)
	reg := newClient(t, f.URL(), registry.Config{})
	if _, _, err := f.RegisterSchema("payments-value", sr.Schema{Schema: paymentV1}); err != nil {
		t.Fatal(err)
	}
	id2, _, err := f.RegisterSchema("payments-value", sr.Schema{Schema: paymentV2})
	if err != nil {
		t.Fatal(err)
	}
	// The app's schema is v1; it writes with the latest, v2.
	s := must(avro.Value[PaymentV1](reg, "payments", paymentV1, registry.WithLatestVersion()))(t)
	b := must(s.Serialize(nil, PaymentV1{ID: "p", Amount: 3}))(t)
	if got := int(b[4]); got != id2 {
		t.Fatalf("framed id %d, latest is %d", got, id2)
	}
	v2 := must(avro.Value[PaymentV2](reg, "other", paymentV2))(t)
	if got := must(v2.Deserialize(b))(t); got != (PaymentV2{ID: "p", Amount: 3, Currency: "EUR"}) {
		t.Fatalf("written with the latest: %+v", got)
	}
	if _, ok := f.GetSchema("payments-value", 3); ok {
		t.Fatal("use-latest registered a version")
	}
}

// TestIncompatibleSchemaFailsCheck: the registry's refusal of a schema
// (409) reaches Check with its message. srfake does not check
// compatibility, so the interceptor answers as Confluent's registry does.
func TestIncompatibleSchemaFailsCheck(t *testing.T) {
	f := newFake(t)
	const msg = `Schema being registered is incompatible with an earlier schema for subject "payments-value"`
	f.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPost || r.URL.Path != "/subjects/payments-value/versions" {
			return false
		}
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		w.WriteHeader(http.StatusConflict)
		fmt.Fprintf(w, `{"error_code":409,"message":%q}`, msg)
		return true
	})
	reg := newClient(t, f.URL(), registry.Config{})
	s := must(avro.Value[PaymentV1](reg, "payments", paymentV1))(t)
	err := s.Check(context.Background())
	if !errors.Is(err, registry.ErrIncompatible) || errors.Is(err, serde.ErrUnavailable) || !strings.Contains(err.Error(), msg) {
		t.Fatalf("Check of an incompatible schema = %v; want ErrIncompatible with the registry's message", err)
	}
	before := f.requests.Load()
	for range 10 {
		if _, serr := s.Serialize(nil, PaymentV1{ID: "p"}); !errors.Is(serr, registry.ErrIncompatible) {
			t.Fatalf("Serialize with an incompatible schema = %v", serr)
		}
	}
	if n := f.requests.Load() - before; n != 0 {
		t.Fatalf("10 Serialize calls after the refusal made %d registry requests, want 0", n)
	}
}

// TestCache: decoding asks the registry once per new writer schema id,
// never per record.
func TestCache(t *testing.T) {
	f := newFake(t)
	writer := newClient(t, f.URL(), registry.Config{})
	v1 := must(avro.Value[PaymentV1](writer, "payments", paymentV1))(t)
	v2 := must(avro.Value[PaymentV2](writer, "payments", paymentV2))(t)
	r1 := must(v1.Serialize(nil, PaymentV1{ID: "a"}))(t)
	r2 := must(v2.Serialize(nil, PaymentV2{ID: "b"}))(t)

	// A reader with a client of its own: its cache starts empty.
	reader := must(avro.Value[PaymentV2](newClient(t, f.URL(), registry.Config{}), "payments", paymentV2))(t)
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
	// Serialize asks once, at its first record.
	before = f.requests.Load()
	for range 100 {
		must(v1.Serialize(nil, PaymentV1{ID: "c"}))(t)
	}
	if got := f.requests.Load() - before; got != 0 {
		t.Fatalf("100 Serialize calls after the first made %d registry requests, want 0", got)
	}
}

func TestBadInput(t *testing.T) {
	f := newFake(t)
	reg := newClient(t, f.URL(), registry.Config{})
	s := must(avro.Value[PaymentV1](reg, "payments", paymentV1))(t)
	good := must(s.Serialize(nil, PaymentV1{ID: "p1", Amount: 42}))(t)
	// A schema of another shape, registered: its records do not match
	// Payment's fields.
	ints := must(avro.Value[int32](reg, "ints", `"int"`))(t)
	anInt := must(ints.Serialize(nil, 7))(t)

	magic1 := append([]byte{1}, good[1:]...)
	unknown := append([]byte{0, 0, 0, 0x30, 0x39}, good[5:]...) // id 12345
	short := good[:len(good)-2]
	long := append(append([]byte(nil), good...), 0x02)
	json := []byte(`{"id":"p1","amount":42}`)
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"magic byte 1", magic1, "magic byte 0x01, not 0"},
		{"unknown id", unknown, "writer schema id 12345 unknown to the registry"},
		{"header only", good[:3], "shorter than the 5-byte Confluent header"},
		{"truncated payload", short, "does not match writer schema id"},
		{"trailing bytes", long, "longer than writer schema id"},
		{"plain JSON", json, "looks like plain JSON"},
		{"another schema", anInt, "cannot be read with the serde's schema"},
		{"empty", nil, "shorter than the 5-byte Confluent header"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Deserialize(c.b)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "eddy: avro: ") {
				t.Fatalf("Deserialize = %v; want an error with %q", err, c.want)
			}
			if errors.Is(err, serde.ErrUnavailable) {
				t.Fatalf("bad input counted as unavailability: %v", err)
			}
		})
	}
	// An unknown id (40403) is remembered by the client for
	// the client's unknown-id TTL: asked again within it, no request.
	before := f.requests.Load()
	_, err := s.Deserialize(unknown)
	if !errors.Is(err, registry.ErrUnknownID) || f.requests.Load()-before != 0 {
		t.Fatalf("unknown id again: %v after %d requests", err, f.requests.Load()-before)
	}
}

func TestRegistryDown(t *testing.T) {
	reg := newClient(t, registrytest.ClosedURL(t), registry.Config{Timeout: 300 * time.Millisecond})
	s := must(avro.Value[PaymentV1](reg, "payments", paymentV1))(t)
	framed := []byte{0, 0, 0, 0, 1, 2, 'p', 0}
	_, err := s.Deserialize(framed)
	if !errors.Is(err, serde.ErrUnavailable) || !strings.Contains(err.Error(), reg.URL()) {
		t.Fatalf("Deserialize with the registry down = %v; want ErrUnavailable naming %s", err, reg.URL())
	}
	_, err = s.Serialize(nil, PaymentV1{ID: "p"})
	if !errors.Is(err, serde.ErrUnavailable) {
		t.Fatalf("Serialize with the registry down = %v", err)
	}
	t.Log(err)
}

func TestRegistryUpAgain(t *testing.T) {
	// Down for the first requests, then up: the retry hides it.
	f := newFake(t)
	var refused atomic.Int64
	f.Intercept(func(w http.ResponseWriter, _ *http.Request) bool {
		if refused.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	reg := newClient(t, f.URL(), registry.Config{Timeout: time.Minute})
	s := must(avro.Value[PaymentV1](reg, "payments", paymentV1))(t)
	if err := s.Check(context.Background()); err != nil {
		t.Fatalf("Check after two 503s: %v", err)
	}
	if refused.Load() != 3 {
		t.Fatalf("%d requests, want 3 (two refused, one served)", refused.Load())
	}
}

func TestCredentialsRefused(t *testing.T) {
	f := newFake(t, srfake.WithAuth("Bearer right"))
	for _, c := range []struct {
		name  string
		token string
		code  string
	}{{"none", "", "HTTP 401"}, {"wrong", "wrong", "HTTP 403"}} {
		t.Run(c.name, func(t *testing.T) {
			reg := newClient(t, f.URL(), registry.Config{BearerToken: c.token, Timeout: 300 * time.Millisecond})
			s := must(avro.Value[PaymentV1](reg, "payments", paymentV1))(t)
			err := s.Check(context.Background())
			if !errors.Is(err, serde.ErrUnavailable) || !strings.Contains(err.Error(), c.code) || !strings.Contains(err.Error(), "refused the credentials") {
				t.Fatalf("Check = %v; want ErrUnavailable naming %s and the credentials", err, c.code)
			}
		})
	}
	reg := newClient(t, f.URL(), registry.Config{BearerToken: "right"})
	s := must(avro.Value[PaymentV1](reg, "payments", paymentV1))(t)
	if err := s.Check(context.Background()); err != nil {
		t.Fatalf("with the right token: %v", err)
	}
}

func TestBasicAuth(t *testing.T) {
	// "user:pass" in base64.
	f := newFake(t, srfake.WithAuth("Basic dXNlcjpwYXNz"))
	reg := newClient(t, f.URL(), registry.Config{Username: "user", Password: "pass"})
	s := must(avro.Value[PaymentV1](reg, "payments", paymentV1))(t)
	if err := s.Check(context.Background()); err != nil {
		t.Fatalf("basic auth: %v", err)
	}
}

// TestConcurrentDecode: records of a new id decoded at once by several
// goroutines (the serde is shared by an app's tasks) ask the registry
// once, and decode right.
func TestConcurrentDecode(t *testing.T) {
	f := newFake(t)
	writer := must(avro.Value[PaymentV1](newClient(t, f.URL(), registry.Config{}), "payments", paymentV1))(t)
	rec := must(writer.Serialize(nil, PaymentV1{ID: "p", Amount: 9}))(t)
	reader := must(avro.Value[PaymentV2](newClient(t, f.URL(), registry.Config{}), "payments", paymentV2))(t)
	before := f.requests.Load()
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 100 {
				got, err := reader.Deserialize(rec)
				if err == nil && got != (PaymentV2{ID: "p", Amount: 9, Currency: "EUR"}) {
					err = fmt.Errorf("decoded %+v", got)
				}
				if err != nil {
					errs <- err
					return
				}
				if _, err := writer.Serialize(nil, PaymentV1{ID: "q"}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := f.requests.Load() - before; n != 1 {
		t.Fatalf("%d registry requests, want 1", n)
	}
}

// TestTLS: a registry served over TLS, trusted through Config.TLS; without
// it the certificate is refused, which is unavailability (the app stops),
// not the record's fault.
func TestTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(srfake.NewRegistry().Handler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	reg := newClient(t, srv.URL, registry.Config{TLS: &tls.Config{RootCAs: roots}})
	s := must(avro.Value[PaymentV1](reg, "payments", paymentV1))(t)
	if got := must(s.Deserialize(must(s.Serialize(nil, PaymentV1{ID: "tls"}))(t)))(t); got.ID != "tls" {
		t.Fatalf("round trip over TLS: %+v", got)
	}
	untrusted := newClient(t, srv.URL, registry.Config{Timeout: 200 * time.Millisecond})
	s = must(avro.Value[PaymentV1](untrusted, "payments", paymentV1))(t)
	if err := s.Check(context.Background()); !errors.Is(err, serde.ErrUnavailable) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Check with an untrusted certificate = %v", err)
	}
}
