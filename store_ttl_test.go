package eddy_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

var sessionsTTL = eddy.NewKeyValueStoreSpec("last-seen", serde.String(), serde.String()).WithTTL(10 * time.Second)

// lastSeen remembers each key's last value for 10s of stream time; a
// value "?" asks for the key's value, forwarded as "key=value" or
// "key=missing".
type lastSeen struct {
	ctx   *eddy.ProcessorContext[string, string]
	store *eddy.KeyValueStore[string, string]
}

func (p *lastSeen) Init(ctx *eddy.ProcessorContext[string, string]) (err error) {
	p.ctx = ctx
	p.store, err = sessionsTTL.Open(ctx)
	return err
}

func (p *lastSeen) Process(r eddy.Record[string, string]) error {
	if r.Value != "?" {
		return p.store.Put(r.Key, r.Value)
	}
	v, ok, err := p.store.Get(r.Key)
	if err != nil {
		return err
	}
	if !ok {
		v = "missing"
	}
	return p.ctx.Forward(eddy.Record[string, string]{Key: r.Key, Value: v, Timestamp: r.Timestamp})
}

func (p *lastSeen) Close() error { return nil }

func TestKeyValueStoreTTL(t *testing.T) {
	const s = 1000
	topo := eddy.NewTopology()
	src := eddy.Source(topo, "in", serde.String(), serde.String())
	eddy.To(eddy.Process(src, "last-seen", func() eddy.Processor[string, string, string, string] { return &lastSeen{} }, sessionsTTL),
		"out", serde.String(), serde.String())
	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := eddytest.Input(d, "in", serde.String(), serde.String())
	steps := []struct {
		key, value string
		ts         int64
	}{
		{"a", "1", 0}, {"b", "1", 5 * s}, {"a", "?", 9 * s}, // a written at 0 lives until 10s
		{"a", "?", 10 * s},                     // expired
		{"b", "2", 12 * s}, {"b", "?", 21 * s}, // rewritten at 12s: lives until 22s
		{"c", "1", 30 * s}, {"b", "?", 31 * s},
	}
	for _, st := range steps {
		if err := in.Pipe(st.key, st.value, st.ts); err != nil {
			t.Fatal(err)
		}
	}
	kvs, err := eddytest.Output(d, "out", serde.String(), serde.String()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range kvs {
		got = append(got, kv.Key+"="+kv.Value)
	}
	if want := []string{"a=1", "a=missing", "b=2", "b=missing"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	// The sweep (every 5s of stream time) deleted the expired entries
	// from the store itself, not only from reads: only c is left.
	st, err := eddytest.KeyValueStore(d, eddy.NewKeyValueStoreSpec("last-seen", serde.String(), serde.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for kv, err := range st.All() {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, kv.Key)
	}
	if strings.Join(keys, ",") != "c" {
		t.Errorf("keys left in the store: %q, want [c]", keys)
	}
}
