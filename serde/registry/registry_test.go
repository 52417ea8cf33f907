package registry_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eddy-streams/eddy/serde"
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

// TestSchemaByID: one request per id, however often it is asked, and an
// id the registry does not know is ErrUnknownID, not unavailability.
func TestSchemaByID(t *testing.T) {
	f := srfake.New()
	defer f.Close()
	var requests atomic.Int64
	f.Intercept(func(http.ResponseWriter, *http.Request) bool { requests.Add(1); return false })
	id, _, err := f.RegisterSchema("s", sr.Schema{Schema: `"string"`})
	if err != nil {
		t.Fatal(err)
	}
	c, err := registry.New(registry.Config{URLs: []string{f.URL()}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		s, err := c.SchemaByID(context.Background(), id)
		if err != nil || s.Schema != `"string"` {
			t.Fatalf("SchemaByID = %+v %v", s, err)
		}
	}
	if requests.Load() != 1 {
		t.Fatalf("%d requests for one id asked 10 times, want 1", requests.Load())
	}
	_, err = c.SchemaByID(context.Background(), 999)
	if !errors.Is(err, registry.ErrUnknownID) || errors.Is(err, serde.ErrUnavailable) {
		t.Fatalf("unknown id: %v", err)
	}
}

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
