package protobuf_test

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

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/eddy-streams/eddy/internal/testutil/registrytest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/protobuf"
	"github.com/eddy-streams/eddy/serde/protobuf/internal/testpb"
	"github.com/eddy-streams/eddy/serde/registry"
)

// fake is an in-process registry that counts the requests it serves.
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
	s := must(protobuf.Value[*testpb.Payment](reg, "payments"))(t)
	in := &testpb.Payment{Id: "p1", Amount: 42}
	b := must(s.Serialize([]byte("kept"), in))(t)
	if string(b[:4]) != "kept" {
		t.Fatalf("Serialize did not append to dst: %q", b)
	}
	b = b[4:]
	ss, ok := f.GetSchema("payments-value", 1)
	if !ok {
		t.Fatal("schema not registered under payments-value")
	}
	if ss.Type != sr.TypeProtobuf || !strings.Contains(ss.Schema.Schema, "message Payment") {
		t.Fatalf("registered %s schema:\n%s", ss.Type, ss.Schema.Schema)
	}
	if id := int(b[1])<<24 | int(b[2])<<16 | int(b[3])<<8 | int(b[4]); b[0] != 0 || id != ss.ID {
		t.Fatalf("header % x, registered id %d", b[:5], ss.ID)
	}
	// The first message of the file: the indexes are the single byte 0.
	if b[5] != 0 || string(b[6:]) != string(must(proto.Marshal(in))(t)) {
		t.Fatalf("record % x: want the index byte 0 then the Protobuf encoding", b)
	}
	out := must(s.Deserialize(b))(t)
	clear(b) // the runtime reuses its fetch buffers: out must not share b
	if !proto.Equal(out, in) {
		t.Fatalf("round trip: %v, want %v", out, in)
	}
	// The registered text is a .proto the registry's parser reads back.
	if _, err := compile(ss.Schema.Schema); err != nil {
		t.Fatalf("registered schema does not compile: %v\n%s", err, ss.Schema.Schema)
	}
}

func TestNestedAndRichMessages(t *testing.T) {
	reg := newClient(t, newFake(t).URL(), registry.Config{})
	reasons := must(protobuf.Key[*testpb.Refund_Reason](reg, "refunds"))(t)
	in := &testpb.Refund_Reason{Text: "damaged", Code: 3}
	b := must(reasons.Serialize(nil, in))(t)
	// Refund is message 1 of the file, Reason its nested message 0:
	// indexes [1, 0] as zig-zag varints after the count 2.
	if got := b[5:8]; string(got) != "\x04\x02\x00" {
		t.Fatalf("indexes % x, want 04 02 00", got)
	}
	if out := must(reasons.Deserialize(b))(t); !proto.Equal(out, in) {
		t.Fatalf("round trip: %v", out)
	}
	if reasons.Subject() != "refunds-key" {
		t.Fatalf("key subject %q", reasons.Subject())
	}

	orders := must(protobuf.Value[*testpb.Order](reg, "orders"))(t)
	note := "gift"
	order := &testpb.Order{Id: "o1", Lines: []*testpb.Line{{Sku: "a", Qty: 2}}, Tags: map[string]string{"k": "v"},
		Note: &note, Price: 9.5, Pay: &testpb.Order_Payment{Payment: &testpb.Payment{Id: "p", Amount: 1}}, Status: testpb.Status_STATUS_OPEN,
		Placed: timestamppb.New(time.Unix(1700000000, 0))}
	if out := must(orders.Deserialize(must(orders.Serialize(nil, order))(t)))(t); !proto.Equal(out, order) {
		t.Fatalf("round trip: %v", out)
	}
}

func TestWellKnownTypeImport(t *testing.T) {
	// A well-known type is a message as any other; the test file
	// imports one (Order.placed), which every other test registers.
	reg := newClient(t, newFake(t).URL(), registry.Config{})
	s := must(protobuf.Value[*timestamppb.Timestamp](reg, "times"))(t)
	in := timestamppb.New(time.Unix(1700000000, 5))
	if out := must(s.Deserialize(must(s.Serialize(nil, in))(t)))(t); !proto.Equal(out, in) {
		t.Fatalf("round trip: %v", out)
	}
}

func TestImportRefused(t *testing.T) {
	reg := newClient(t, newFake(t).URL(), registry.Config{})
	if _, err := protobuf.Value[*testpb.Envelope](reg, "t"); err == nil || !strings.Contains(err.Error(), "envelope.proto imports payment.proto") {
		t.Fatalf("Value of a message whose file imports another = %v", err)
	}
}

func TestDynamicMessageRefused(t *testing.T) {
	reg := newClient(t, newFake(t).URL(), registry.Config{})
	if _, err := protobuf.Value[*dynamicpb.Message](reg, "t"); err == nil || !strings.Contains(err.Error(), "not a generated message type") {
		t.Fatalf("Value[*dynamicpb.Message] = %v", err)
	}
}

// paymentV2 is the test file with a field added to Payment, as a later
// producer has it.
func paymentV2(t *testing.T, reg *registry.Client) string {
	t.Helper()
	v1 := must(protobuf.Value[*testpb.Payment](reg, "any"))(t).Schema()
	v2 := strings.Replace(v1, "int64 amount = 2;", "int64 amount = 2;\n  string currency = 3;", 1)
	if v2 == v1 {
		t.Fatalf("no amount field in\n%s", v1)
	}
	return v2
}

func compile(text string) (protoreflect.FileDescriptor, error) {
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"x.proto": text}),
	})}
	files, err := c.Compile(context.Background(), "x.proto")
	if err != nil {
		return nil, err
	}
	return files[0], nil
}

// newerRecord registers paymentV2 under payments-value and returns a
// record of it, framed as Confluent's serializer frames it.
func newerRecord(t *testing.T, reg *registry.Client) ([]byte, protoreflect.MessageDescriptor) {
	t.Helper()
	text := paymentV2(t, reg)
	file := must(compile(text))(t)
	id := must(reg.Register(context.Background(), "payments-value", sr.Schema{Schema: text, Type: sr.TypeProtobuf}))(t)
	desc := file.Messages().ByName("Payment")
	m := dynamicpb.NewMessage(desc)
	m.Set(desc.Fields().ByName("id"), protoreflect.ValueOfString("p2"))
	m.Set(desc.Fields().ByName("amount"), protoreflect.ValueOfInt64(7))
	m.Set(desc.Fields().ByName("currency"), protoreflect.ValueOfString("USD"))
	b := append(registry.AppendHeader(nil, id), 0)
	return append(b, must(proto.Marshal(m))(t)...), desc
}

func TestEvolutionKeepsUnknownFields(t *testing.T) {
	reg := newClient(t, newFake(t).URL(), registry.Config{})
	old := must(protobuf.Value[*testpb.Payment](reg, "payments"))(t)
	must(old.Serialize(nil, &testpb.Payment{Id: "p1"}))(t) // v1 registered first
	rec, v2 := newerRecord(t, reg)

	buf := append([]byte(nil), rec...)
	got := must(old.Deserialize(buf))(t)
	clear(buf) // the unknown fields must not share the fetch buffer
	if got.Id != "p2" || got.Amount != 7 || len(got.ProtoReflect().GetUnknown()) == 0 {
		t.Fatalf("old reader, new record: %v (unknown % x)", got, got.ProtoReflect().GetUnknown())
	}
	// Written again by the old serde, the new field is still there.
	again := must(old.Serialize(nil, got))(t)
	m := dynamicpb.NewMessage(v2)
	if err := proto.Unmarshal(again[6:], m); err != nil {
		t.Fatal(err)
	}
	if c := m.Get(v2.Fields().ByName("currency")).String(); c != "USD" {
		t.Fatalf("currency after an old reader's round trip: %q", c)
	}
}

func TestUseLatestAndAutoRegisterOff(t *testing.T) {
	reg := newClient(t, newFake(t).URL(), registry.Config{})
	off := must(protobuf.Value[*testpb.Payment](reg, "payments", registry.WithoutAutoRegister()))(t)
	if err := off.Check(context.Background()); !errors.Is(err, registry.ErrNotRegistered) || !strings.Contains(err.Error(), "auto-register is off") {
		t.Fatalf("Check with auto-register off, nothing registered = %v", err)
	}
	// Registered by another serde (a deployment step): found by lookup.
	on := must(protobuf.Value[*testpb.Payment](reg, "payments"))(t)
	must(on.Serialize(nil, &testpb.Payment{}))(t)
	found := must(protobuf.Value[*testpb.Payment](reg, "payments", registry.WithoutAutoRegister()))(t)
	if err := found.Check(context.Background()); err != nil {
		t.Fatalf("lookup of a registered schema: %v", err)
	}

	_, _ = newerRecord(t, reg) // v2 is now the latest
	latest := must(protobuf.Value[*testpb.Payment](reg, "payments", registry.WithLatestVersion()))(t)
	b := must(latest.Serialize(nil, &testpb.Payment{Id: "l"}))(t)
	v2id := must(reg.Latest(context.Background(), "payments-value"))(t).ID
	if id, _, _ := registry.SplitHeader(b); id != v2id {
		t.Fatalf("use-latest wrote id %d, want the latest %d", id, v2id)
	}
	// A latest schema that does not define the message is refused.
	must(reg.Register(context.Background(), "other-value", sr.Schema{Schema: "syntax = \"proto3\";\nmessage Other { string x = 1; }\n", Type: sr.TypeProtobuf}))(t)
	wrong := must(protobuf.Value[*testpb.Payment](reg, "other", registry.WithLatestVersion()))(t)
	if err := wrong.Check(context.Background()); err == nil || !strings.Contains(err.Error(), "not the serde's eddy.test.bank.Payment") {
		t.Fatalf("use-latest with another message = %v", err)
	}
}

func TestRecordNameStrategy(t *testing.T) {
	f := newFake(t)
	reg := newClient(t, f.URL(), registry.Config{})
	s := must(protobuf.Value[*testpb.Payment](reg, "payments", registry.WithSubjectNameStrategy(registry.TopicRecordName)))(t)
	if s.Subject() != "payments-eddy.test.bank.Payment" {
		t.Fatalf("subject %q", s.Subject())
	}
}

func TestCache(t *testing.T) {
	f := newFake(t)
	writer := newClient(t, f.URL(), registry.Config{})
	w := must(protobuf.Value[*testpb.Payment](writer, "payments"))(t)
	r1 := must(w.Serialize(nil, &testpb.Payment{Id: "a"}))(t)
	r2, _ := newerRecord(t, writer)

	reader := must(protobuf.Value[*testpb.Payment](newClient(t, f.URL(), registry.Config{}), "payments"))(t)
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
		must(w.Serialize(nil, &testpb.Payment{Id: "c"}))(t)
	}
	if got := f.requests.Load() - before; got != 0 {
		t.Fatalf("100 Serialize calls after the first made %d registry requests, want 0", got)
	}
}

func TestBadInput(t *testing.T) {
	f := newFake(t)
	reg := newClient(t, f.URL(), registry.Config{})
	s := must(protobuf.Value[*testpb.Payment](reg, "payments"))(t)
	good := must(s.Serialize(nil, &testpb.Payment{Id: "p1", Amount: 42}))(t)
	lines := must(protobuf.Value[*testpb.Line](reg, "lines"))(t)
	line := &testpb.Line{Sku: "a"}
	aLine := must(lines.Serialize(nil, line))(t)
	avro := must(reg.Register(context.Background(), "avro-value", sr.Schema{Schema: `"string"`, Type: sr.TypeAvro}))(t)

	with := func(head []byte, tail ...byte) []byte { return append(append([]byte(nil), head...), tail...) }
	magic1 := with([]byte{1}, good[1:]...)
	unknown := with([]byte{0, 0, 0, 0x30, 0x39}, good[5:]...)
	// Index [1] in Payment's schema names Refund, not Payment.
	wrongIndex := with(good[:5], append([]byte{2, 2}, good[6:]...)...)
	outOfRange := with(good[:5], append([]byte{2, 40}, good[6:]...)...)
	// Payment's payload after Line's id: Line is message 3 of the same
	// file, so the indexes name Line.
	lineWithPayment := with(aLine[:len(aLine)-len(must(proto.Marshal(line))(t))], good[6:]...)
	negCount := with(good[:5], 1)
	truncated := good[:len(good)-3] // inside the id string
	badWire := with(good, 0x0f)     // field 1 with wire type 7
	avroRecord := with(registry.AppendHeader(nil, avro), 0, 2, 'x')
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"magic byte 1", magic1, "magic byte 0x01, not 0"},
		{"unknown id", unknown, "writer schema id 12345 unknown to the registry"},
		{"plain JSON", []byte(`{"id":"p1","amount":42}`), "looks like plain JSON"},
		{"wrong message index", wrongIndex, "name eddy.test.bank.Refund in writer schema id"},
		{"index out of range", outOfRange, "message index 20 (at depth 1) names no message"},
		{"another message's indexes", lineWithPayment, "name eddy.test.bank.Line"},
		{"negative index count", negCount, "message indexes unreadable"},
		{"no indexes", good[:5], "message indexes unreadable"},
		{"truncated payload", truncated, "is not a eddy.test.bank.Payment"},
		{"invalid wire type", badWire, "is not a eddy.test.bank.Payment"},
		{"an Avro schema id", avroRecord, "is AVRO, not PROTOBUF"},
		{"empty", nil, "shorter than the 5-byte Confluent header"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Deserialize(c.b)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "eddy: protobuf: ") {
				t.Fatalf("Deserialize(% x) = %v; want an error with %q", c.b, err, c.want)
			}
			if errors.Is(err, serde.ErrUnavailable) {
				t.Fatalf("bad input counted as unavailability: %v", err)
			}
		})
	}
}

func TestRegistryDown(t *testing.T) {
	reg := newClient(t, registrytest.ClosedURL(t), registry.Config{Timeout: 300 * time.Millisecond})
	s := must(protobuf.Value[*testpb.Payment](reg, "payments"))(t)
	if _, err := s.Deserialize([]byte{0, 0, 0, 0, 1, 0, 0x0a, 1, 'p'}); !errors.Is(err, serde.ErrUnavailable) {
		t.Fatalf("Deserialize with the registry down = %v", err)
	}
	if _, err := s.Serialize(nil, &testpb.Payment{}); !errors.Is(err, serde.ErrUnavailable) {
		t.Fatalf("Serialize with the registry down = %v", err)
	}
}

func TestCredentialsRefused(t *testing.T) {
	f := newFake(t, srfake.WithAuth("Bearer right"))
	reg := newClient(t, f.URL(), registry.Config{BearerToken: "wrong", Timeout: 300 * time.Millisecond})
	s := must(protobuf.Value[*testpb.Payment](reg, "payments"))(t)
	if err := s.Check(context.Background()); !errors.Is(err, serde.ErrUnavailable) || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("Check with a wrong token = %v", err)
	}
	ok := must(protobuf.Value[*testpb.Payment](newClient(t, f.URL(), registry.Config{BearerToken: "right"}), "payments"))(t)
	if err := ok.Check(context.Background()); err != nil {
		t.Fatalf("Check with the right token: %v", err)
	}
}

// TestConcurrentDecode: records of two ids decoded at once by many
// goroutines, with the cache empty (run with -race).
func TestConcurrentDecode(t *testing.T) {
	f := newFake(t)
	writer := newClient(t, f.URL(), registry.Config{})
	r1 := must(must(protobuf.Value[*testpb.Payment](writer, "payments"))(t).Serialize(nil, &testpb.Payment{Id: "a", Amount: 1}))(t)
	r2, _ := newerRecord(t, writer)
	reader := must(protobuf.Value[*testpb.Payment](newClient(t, f.URL(), registry.Config{}), "payments"))(t)
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
