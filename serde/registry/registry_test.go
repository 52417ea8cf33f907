package registry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eddy-streams/eddy/schemaregistry"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/avro"
	"github.com/eddy-streams/eddy/serde/registry"
)

func TestHeader(t *testing.T) {
	b := registry.AppendHeader([]byte("x"), 0x01020304)
	if string(b) != "x\x00\x01\x02\x03\x04" {
		t.Fatalf("AppendHeader = %q", b)
	}
	id, payload, err := registry.SplitHeader(append(b[1:], 'p'))
	if err != nil || id != 0x01020304 || string(payload) != "p" {
		t.Fatalf("SplitHeader = %d %q %v", id, payload, err)
	}
	for _, c := range []struct {
		b    string
		want string
	}{
		{"\x00\x00\x00\x01", "4 bytes, shorter than the 5-byte"},
		{"\x01\x00\x00\x00\x01", "magic byte 0x01, not 0"},
		{`{"a":1}`, "looks like plain JSON"},
	} {
		if _, _, err := registry.SplitHeader([]byte(c.b)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SplitHeader(%q) = %v; want %q", c.b, err, c.want)
		}
	}
}

func TestSubjectNameStrategies(t *testing.T) {
	for _, c := range []struct {
		s      registry.SubjectNameStrategy
		key    bool
		record string
		want   string
	}{
		{registry.TopicName, false, "bank.Payment", "payments-value"},
		{registry.TopicName, true, "", "payments-key"},
		{registry.RecordName, false, "bank.Payment", "bank.Payment"},
		{registry.TopicRecordName, true, "bank.Payment", "payments-bank.Payment"},
	} {
		if got, err := c.s("payments", c.key, c.record); err != nil || got != c.want {
			t.Errorf("subject %q %v, want %q", got, err, c.want)
		}
	}
	if _, err := registry.TopicRecordName("payments", false, ""); err == nil {
		t.Error("TopicRecordName of an unnamed schema: no error")
	}
	if w := registry.NewWriter(); !w.AutoRegister || w.UseLatest {
		t.Errorf("defaults %+v: want auto-register on, use-latest off", w)
	}
	if w := registry.NewWriter(registry.WithLatestVersion()); w.AutoRegister || !w.UseLatest {
		t.Errorf("WithLatestVersion %+v: want use-latest on, auto-register off", w)
	}
}

func TestNewRejectsNegativeTimeout(t *testing.T) {
	if _, err := registry.New(registry.Config{Timeout: -1}); err == nil {
		t.Fatal("a negative Timeout was accepted")
	}
}

// countingRegistry is eddy's development registry behind a handler that
// counts the requests reaching it.
type countingRegistry struct {
	url      string
	requests atomic.Int64
}

func newCountingRegistry(t *testing.T) *countingRegistry {
	t.Helper()
	reg, err := schemaregistry.NewServer("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	cr := &countingRegistry{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cr.requests.Add(1)
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cr.url = srv.URL
	return cr
}

// register registers an Avro schema under subject with a client of its
// own (so that the client under test has cached nothing) and returns its
// id.
func (cr *countingRegistry) register(t *testing.T, subject, schema string) int {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(cr.url))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := cl.CreateSchema(context.Background(), subject, sr.Schema{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	return ss.ID
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestSchemaByID: an id is asked once, however often it is decoded
// (measured: 0 requests after the first); an id the registry does not
// know is ErrUnknownID, not unavailability, and that answer is kept for
// Config.UnknownIDTTL (its default here): N decodes of one unknown id make
// 1 request within it, and the first decode after it asks again (and
// finds a schema registered meanwhile).
func TestSchemaByID(t *testing.T) {
	cr := newCountingRegistry(t)
	id := cr.register(t, "s", `"string"`)
	c, err := registry.New(registry.Config{URLs: []string{cr.url}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	registry.SetClock(c, func() time.Time { return now })
	ctx := context.Background()

	before := cr.requests.Load()
	if s, err := c.SchemaByID(ctx, id); err != nil || s.Schema != `"string"` {
		t.Fatalf("SchemaByID = %+v %v", s, err)
	}
	if n := cr.requests.Load() - before; n != 1 {
		t.Fatalf("first decode of id %d: %d requests, want 1", id, n)
	}
	before = cr.requests.Load()
	for range 100 {
		if s, err := c.SchemaByID(ctx, id); err != nil || s.Schema != `"string"` {
			t.Fatalf("SchemaByID = %+v %v", s, err)
		}
	}
	if n := cr.requests.Load() - before; n != 0 {
		t.Fatalf("100 decodes of a known id: %d requests, want 0", n)
	}

	// The next id the registry will assign: unknown now.
	unknown := id + 1
	before = cr.requests.Load()
	for i := range 100 {
		_, err := c.SchemaByID(ctx, unknown)
		if !errors.Is(err, registry.ErrUnknownID) || errors.Is(err, serde.ErrUnavailable) {
			t.Fatalf("decode %d of unknown id %d: %v, want ErrUnknownID", i, unknown, err)
		}
	}
	if n := cr.requests.Load() - before; n != 1 {
		t.Fatalf("100 decodes of one unknown id: %d requests, want 1", n)
	}

	// Registered meanwhile (by another client): still unknown to this one
	// until the TTL has passed.
	if got := cr.register(t, "t", `"int"`); got != unknown {
		t.Fatalf("the registry assigned id %d, want %d", got, unknown)
	}
	now = now.Add(registry.DefaultUnknownIDTTL - time.Nanosecond)
	before = cr.requests.Load()
	if _, err := c.SchemaByID(ctx, unknown); !errors.Is(err, registry.ErrUnknownID) {
		t.Fatalf("just within the TTL: %v, want the remembered ErrUnknownID", err)
	}
	if n := cr.requests.Load() - before; n != 0 {
		t.Fatalf("within the TTL: %d requests, want 0", n)
	}
	now = now.Add(time.Nanosecond)
	if s, err := c.SchemaByID(ctx, unknown); err != nil || s.Schema != `"int"` {
		t.Fatalf("after the TTL: %+v %v, want the schema registered meanwhile", s, err)
	}
	if n := cr.requests.Load() - before; n != 1 {
		t.Fatalf("after the TTL: %d requests, want 1", n)
	}
}

// TestSchemaByIDUnknownShared: concurrent decodes of one unknown id share
// one request too.
func TestSchemaByIDUnknownShared(t *testing.T) {
	cr := newCountingRegistry(t)
	c, err := registry.New(registry.Config{URLs: []string{cr.url}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const callers = 16
	errs := make(chan error, callers)
	for range callers {
		go func() { _, err := c.SchemaByID(context.Background(), 5); errs <- err }()
	}
	for range callers {
		if err := <-errs; !errors.Is(err, registry.ErrUnknownID) {
			t.Fatalf("unknown id: %v", err)
		}
	}
	if n := cr.requests.Load(); n != 1 {
		t.Fatalf("%d concurrent decodes of one unknown id: %d requests, want 1", callers, n)
	}
}

// TestClose: a Deserialize blocked retrying a registry that is down (a
// closed port; a bound of a day, and an hour's wait before the second
// attempt, so that only Close can end the call before the test times out)
// returns when the client is closed, with ErrClosed and serde.ErrUnavailable (so no error policy
// dead-letters the record); later calls fail the same way, a cached id
// included, without a request; Close again is harmless.
func TestClose(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	warned := make(chan struct{}, 1)
	c, err := registry.New(registry.Config{URLs: []string{url}, Timeout: 24 * time.Hour,
		Logger: slog.New(signalHandler{warned})})
	if err != nil {
		t.Fatal(err)
	}
	registry.SetFirstBackoff(c, time.Hour)
	s, err := avro.Value[string](c, "t", `"string"`)
	if err != nil {
		t.Fatal(err)
	}
	record := registry.AppendHeader(nil, 1)
	record = append(record, 0) // the empty string
	done := make(chan error, 1)
	go func() { _, err := s.Deserialize(record); done <- err }()
	<-warned // the first attempt failed: it is retrying
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	err = <-done
	if !errors.Is(err, registry.ErrClosed) || !errors.Is(err, serde.ErrUnavailable) {
		t.Fatalf("Deserialize interrupted by Close = %v; want ErrClosed and ErrUnavailable", err)
	}
	if _, err := c.SchemaByID(context.Background(), 1); !errors.Is(err, registry.ErrClosed) || !errors.Is(err, serde.ErrUnavailable) {
		t.Fatalf("SchemaByID after Close = %v", err)
	}
	if _, err := c.Register(context.Background(), "t-value", sr.Schema{Schema: `"string"`}); !errors.Is(err, registry.ErrClosed) {
		t.Fatalf("Register after Close = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// TestCloseRefusesCachedIDs: after Close even an id the client holds is
// refused, and nothing reaches the registry.
func TestCloseRefusesCachedIDs(t *testing.T) {
	cr := newCountingRegistry(t)
	id := cr.register(t, "s", `"string"`)
	c, err := registry.New(registry.Config{URLs: []string{cr.url}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SchemaByID(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	c.Close()
	before := cr.requests.Load()
	if _, err := c.SchemaByID(context.Background(), id); !errors.Is(err, registry.ErrClosed) {
		t.Fatalf("SchemaByID of a cached id after Close = %v", err)
	}
	if _, err := c.SchemaByID(context.Background(), id+1); !errors.Is(err, registry.ErrClosed) {
		t.Fatalf("SchemaByID of a new id after Close = %v", err)
	}
	if n := cr.requests.Load() - before; n != 0 {
		t.Fatalf("%d requests after Close, want 0", n)
	}
}

// signalHandler is a slog.Handler that signals its first warning.
type signalHandler struct{ warned chan struct{} }

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		select {
		case h.warned <- struct{}{}:
		default:
		}
	}
	return nil
}
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }

// TestSchemaByIDSharesAFailure: calls that wait for the same new id while
// the registry is down share the one fetch's answer, its error included,
// instead of each retrying for the bound after the other.
func TestSchemaByIDSharesAFailure(t *testing.T) {
	f := srfake.New()
	defer f.Close()
	var requests atomic.Int64
	f.Intercept(func(w http.ResponseWriter, _ *http.Request) bool {
		requests.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	c, err := registry.New(registry.Config{URLs: []string{f.URL()}, Timeout: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	const callers = 4
	errs := make(chan error, callers)
	for range callers {
		go func() { _, err := c.SchemaByID(context.Background(), 7); errs <- err }()
	}
	var first error
	for i := range callers {
		err := <-errs
		if !errors.Is(err, serde.ErrUnavailable) {
			t.Fatalf("caller %d: %v, want ErrUnavailable", i, err)
		}
		if i == 0 {
			first = err
		} else if err != first {
			t.Errorf("caller %d got its own error (%v), not the shared fetch's (%v): it retried on its own", i, err, first)
		}
	}
	if requests.Load() == 0 {
		t.Fatal("no request reached the registry")
	}
}

// TestNotARegistry: a 404 without a registry error code (a wrong URL
// path) is not taken for an unknown id, which would dead-letter records.
func TestNotARegistry(t *testing.T) {
	f := srfake.New()
	defer f.Close()
	c, err := registry.New(registry.Config{URLs: []string{f.URL() + "/wrong/prefix"}, Timeout: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SchemaByID(context.Background(), 1); !errors.Is(err, serde.ErrUnavailable) || !strings.Contains(err.Error(), "is the URL a schema registry") {
		t.Fatalf("SchemaByID on a wrong path = %v", err)
	}
}

// TestUnavailableWarns: an unreachable registry is retried within the
// bound, warned about once (the next warning would come 30 s later)
// naming the URL and the error, then reported as serde.ErrUnavailable.
func TestUnavailableWarns(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	var logs strings.Builder
	c, err := registry.New(registry.Config{URLs: []string{url}, Timeout: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SchemaByID(context.Background(), 1)
	if !errors.Is(err, serde.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("SchemaByID = %v; want ErrUnavailable with the cause", err)
	}
	warns := strings.Count(logs.String(), "level=WARN")
	if warns != 1 || !strings.Contains(logs.String(), "url="+url) || !strings.Contains(logs.String(), "connection refused") {
		t.Fatalf("%d warnings, want 1 naming %s and the error:\n%s", warns, url, logs.String())
	}
}

func TestSplitMessageIndexes(t *testing.T) {
	for _, c := range []struct {
		b       string
		indexes string
		payload string
	}{
		{"\x00p", "[0]", "p"},             // the shortcut for the first message
		{"\x02\x04p", "[2]", "p"},         // one index, 2
		{"\x04\x02\x00pq", "[1 0]", "pq"}, // a message nested in the second
	} {
		ix, payload, err := registry.SplitMessageIndexes([]byte(c.b))
		if err != nil || fmt.Sprint(ix) != c.indexes || string(payload) != c.payload {
			t.Errorf("SplitMessageIndexes(%q) = %v %q %v; want %s %q", c.b, ix, payload, err, c.indexes, c.payload)
		}
	}
	for _, b := range []string{"", "\x01", "\x02", "\x02\x01", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"} {
		if ix, _, err := registry.SplitMessageIndexes([]byte(b)); err == nil || !strings.Contains(err.Error(), "Protobuf framing") {
			t.Errorf("SplitMessageIndexes(%q) = %v %v; want an error", b, ix, err)
		}
	}
}

// TestReferences: a schema's references are returned with theirs, each
// once and after those it references, each subject and version asked of
// the registry once; a reference the registry does not hold is
// ErrNotRegistered, not unavailability.
func TestReferences(t *testing.T) {
	cr := newCountingRegistry(t)
	cl, err := sr.NewClient(sr.URLs(cr.url))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	register := func(subject, text string, refs ...sr.SchemaReference) {
		t.Helper()
		if _, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: text, Type: sr.TypeProtobuf, References: refs}); err != nil {
			t.Fatal(err)
		}
	}
	register("a", `syntax = "proto3"; package t; message A {}`)
	register("b", `syntax = "proto3"; package t; import "a.proto"; message B { A a = 1; }`, sr.SchemaReference{Name: "a.proto", Subject: "a", Version: 1})
	top := sr.Schema{Schema: `syntax = "proto3"; package t; import "a.proto"; import "b.proto"; message C { A a = 1; B b = 2; }`, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "b.proto", Subject: "b", Version: 1}, {Name: "a.proto", Subject: "a", Version: 1}}}
	c, err := registry.New(registry.Config{URLs: []string{cr.url}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := cr.requests.Load()
	refs, err := c.References(ctx, top)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range refs {
		names = append(names, r.Name)
	}
	if fmt.Sprint(names) != "[a.proto b.proto]" || !strings.Contains(refs[1].Schema.Schema, "message B") {
		t.Fatalf("References = %+v, want a.proto then b.proto", refs)
	}
	if n := cr.requests.Load() - before; n != 2 {
		t.Fatalf("%d requests for two referenced schemas, want 2", n)
	}
	before = cr.requests.Load()
	if _, err := c.References(ctx, top); err != nil {
		t.Fatal(err)
	}
	if n := cr.requests.Load() - before; n != 0 {
		t.Fatalf("references asked again: %d requests, want 0", n)
	}

	missing := sr.Schema{References: []sr.SchemaReference{{Name: "x.proto", Subject: "nobody", Version: 1}}}
	if _, err := c.References(ctx, missing); !errors.Is(err, registry.ErrNotRegistered) || errors.Is(err, serde.ErrUnavailable) {
		t.Fatalf("a reference to a subject the registry lacks: %v, want ErrNotRegistered", err)
	}
}
