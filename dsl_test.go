package eddy_test

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

// The tests of this file run each topology against its own in-process
// broker, with one-partition topics where the order of outputs matters and
// four partitions where a per-key order is enough.

// renderStrings decodes string keys and values as "key=value".
func renderStrings(t *testing.T, recs []*kgo.Record) []string {
	return render(decode(t, recs, serde.String(), serde.String()))
}

func render[K, V comparable](kvs []kv[K, V]) []string {
	out := make([]string, len(kvs))
	for i, p := range kvs {
		out[i] = p.String()
	}
	return out
}

func TestStatelessOperators(t *testing.T) {
	t.Parallel()
	base := time.UnixMilli(1_700_000_000_000)
	cases := []struct {
		name   string
		build  func(topo *eddy.Topology, in, out string)
		input  []*kgo.Record
		want   []string
		render func(*testing.T, []*kgo.Record) []string
		// check, if set, compares each output with the input it came from
		// (one output per input).
		check func(t *testing.T, in, out *kgo.Record)
	}{
		{
			name: "Map changes key type and value",
			build: func(topo *eddy.Topology, in, out string) {
				s := eddy.Source(topo, in, serde.String(), serde.String())
				m := eddy.Map(s, func(k, v string) (int64, string) { return int64(len(v)), k + ":" + strings.ToUpper(v) })
				eddy.To(m, out, serde.Int64(), serde.String())
			},
			input: []*kgo.Record{
				{Key: []byte("a"), Value: []byte("x"), Timestamp: base, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("0")}}},
				{Key: []byte("b"), Value: []byte("hello"), Timestamp: base.Add(time.Second), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("1")}}},
				{Key: []byte("c"), Value: []byte("hi"), Timestamp: base.Add(2 * time.Second)},
			},
			want: []string{"1=a:X", "5=b:HELLO", "2=c:HI"},
			render: func(t *testing.T, recs []*kgo.Record) []string {
				return render(decode(t, recs, serde.Int64(), serde.String()))
			},
			check: func(t *testing.T, in, out *kgo.Record) {
				if !in.Timestamp.Equal(out.Timestamp) {
					t.Errorf("output %s: timestamp %v, want the input's %v", out.Value, out.Timestamp, in.Timestamp)
				}
				if fmt.Sprint(in.Headers) != fmt.Sprint(out.Headers) {
					t.Errorf("output %s: headers %v, want the input's %v", out.Value, out.Headers, in.Headers)
				}
			},
		},
		{
			name: "MapValues keeps the key",
			build: func(topo *eddy.Topology, in, out string) {
				s := eddy.Source(topo, in, serde.String(), serde.String())
				m := eddy.MapValues(s, func(k, v string) int64 { return int64(len(k + v)) })
				eddy.To(m, out, serde.String(), serde.Int64())
			},
			input: []*kgo.Record{srec("a", "x"), srec("bb", "hello"), srec("c", "")},
			want:  []string{"a=2", "bb=7", "c=1"},
			render: func(t *testing.T, recs []*kgo.Record) []string {
				return render(decode(t, recs, serde.String(), serde.Int64()))
			},
		},
		{
			name: "Filter keeps even values",
			build: func(topo *eddy.Topology, in, out string) {
				s := eddy.Source(topo, in, serde.String(), serde.Int64())
				eddy.To(eddy.Filter(s, func(_ string, v int64) bool { return v%2 == 0 }), out, serde.String(), serde.Int64())
			},
			input: []*kgo.Record{
				rec([]byte("a"), i64(1)), rec([]byte("b"), i64(2)), rec([]byte("c"), i64(3)),
				rec([]byte("d"), i64(4)), rec([]byte("e"), i64(-6)), rec([]byte("f"), i64(7)),
			},
			want: []string{"b=2", "d=4", "e=-6"},
			render: func(t *testing.T, recs []*kgo.Record) []string {
				return render(decode(t, recs, serde.String(), serde.Int64()))
			},
		},
		{
			name: "FlatMap emits zero, one or several records",
			build: func(topo *eddy.Topology, in, out string) {
				s := eddy.Source(topo, in, serde.String(), serde.String())
				words := eddy.FlatMap(s, func(dst []eddy.KeyValue[string, string], k, v string) []eddy.KeyValue[string, string] {
					for i, w := range strings.Fields(v) {
						dst = append(dst, eddy.KeyValue[string, string]{Key: w, Value: k + "#" + strconv.Itoa(i)})
					}
					return dst
				})
				eddy.To(words, out, serde.String(), serde.String())
			},
			input:  []*kgo.Record{srec("none", ""), srec("one", "solo"), srec("three", "x y z"), srec("blank", "   "), srec("two", "p q")},
			want:   []string{"solo=one#0", "x=three#0", "y=three#1", "z=three#2", "p=two#0", "q=two#1"},
			render: renderStrings,
		},
		{
			name: "Filter, MapValues and Map chained",
			build: func(topo *eddy.Topology, in, out string) {
				s := eddy.Source(topo, in, serde.String(), serde.String())
				s = eddy.Filter(s, func(k, _ string) bool { return k != "skip" })
				s = eddy.MapValues(s, func(_ string, v string) string { return v + v })
				s = eddy.Map(s, func(k, v string) (string, string) { return v, k })
				eddy.To(s, out, serde.String(), serde.String())
			},
			input:  []*kgo.Record{srec("a", "1"), srec("skip", "2"), srec("b", "3")},
			want:   []string{"11=a", "33=b"},
			render: renderStrings,
		},
		{
			name: "a stream feeds its children in the order they were added",
			build: func(topo *eddy.Topology, in, out string) {
				s := eddy.Source(topo, in, serde.String(), serde.String())
				eddy.To(s, out, serde.String(), serde.String())
				eddy.To(eddy.MapValues(s, func(_ string, v string) string { return strings.ToUpper(v) }), out, serde.String(), serde.String())
			},
			input:  []*kgo.Record{srec("a", "x"), srec("b", "y")},
			want:   []string{"a=x", "a=X", "b=y", "b=Y"},
			render: renderStrings,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := startBroker(t)
			in, out := "in", "out"
			createTopics(t, addr, 1, in, out)
			topo := eddy.NewTopology()
			tc.build(topo, in, out)
			if err := topo.Err(); err != nil {
				t.Fatalf("topology: %v", err)
			}
			app := run(t, topo, config(t, addr))
			produced := produce(t, addr, in, tc.input...)
			recs := waitRecords(t, addr, out, len(tc.want), app)
			if got := tc.render(t, recs); !slices.Equal(got, tc.want) {
				t.Errorf("outputs:\n got %q\nwant %q", got, tc.want)
			}
			if tc.check != nil && len(recs) == len(produced) {
				for i := range recs {
					tc.check(t, produced[i], recs[i])
				}
			}
			if err := app.stop(t); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}

// TestAggregations covers GroupByKey with Count, Aggregate and Reduce, each
// read back through ToStream and To, and the content of each store's
// changelog, over four partitions (four tasks).
func TestAggregations(t *testing.T) {
	t.Parallel()
	// Inputs: (key, value). Per key, in order: a: 1 3 5; b: 2 -1 6; c: 4.
	inputs := []kv[string, int64]{{"a", 1}, {"b", 2}, {"a", 3}, {"c", 4}, {"b", -1}, {"a", 5}, {"b", 6}}
	cases := []struct {
		name  string
		store string
		build func(s eddy.Stream[string, int64], store string) eddy.Table[string, int64]
		want  map[string][]int64 // the table's updates, per key in order
		state map[string]int64   // the changelog's final value per key
	}{
		{
			name:  "Count",
			store: "counts",
			build: func(s eddy.Stream[string, int64], store string) eddy.Table[string, int64] {
				// Filter and MapValues keep the key, so GroupByKey may follow.
				s = eddy.Filter(s, func(_ string, v int64) bool { return v >= 0 })
				s = eddy.MapValues(s, func(_ string, v int64) int64 { return v * 10 })
				return eddy.Count(eddy.GroupByKey(s, serde.String()), store)
			},
			want:  map[string][]int64{"a": {1, 2, 3}, "b": {1, 2}, "c": {1}},
			state: map[string]int64{"a": 3, "b": 2, "c": 1},
		},
		{
			name:  "Aggregate sum",
			store: "sums",
			build: func(s eddy.Stream[string, int64], store string) eddy.Table[string, int64] {
				return eddy.Aggregate(eddy.GroupByKey(s, serde.String()), store,
					func() int64 { return 0 },
					func(_ string, v, sum int64) int64 { return sum + v },
					serde.Int64())
			},
			want:  map[string][]int64{"a": {1, 4, 9}, "b": {2, 1, 7}, "c": {4}},
			state: map[string]int64{"a": 9, "b": 7, "c": 4},
		},
		{
			name:  "Reduce max",
			store: "maxima",
			build: func(s eddy.Stream[string, int64], store string) eddy.Table[string, int64] {
				return eddy.Reduce(eddy.GroupByKey(s, serde.String()), store,
					func(agg, v int64) int64 { return max(agg, v) }, serde.Int64())
			},
			want:  map[string][]int64{"a": {1, 3, 5}, "b": {2, 2, 6}, "c": {4}},
			state: map[string]int64{"a": 5, "b": 6, "c": 4},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := startBroker(t)
			in, out := "numbers", "updates"
			createTopics(t, addr, 4, in, out)
			topo := eddy.NewTopology()
			table := tc.build(eddy.Source(topo, in, serde.String(), serde.Int64()), tc.store)
			if table.StoreName() != tc.store {
				t.Errorf("StoreName() = %q, want %q", table.StoreName(), tc.store)
			}
			eddy.To(eddy.ToStream(table), out, serde.String(), serde.Int64())
			cfg := config(t, addr)
			cfg.TableCacheBytes = eddy.NoTableCache // want lists every update
			app := run(t, topo, cfg)

			var recs []*kgo.Record
			for _, p := range inputs {
				recs = append(recs, rec([]byte(p.Key), i64(p.Value)))
			}
			produce(t, addr, in, recs...)
			total := 0
			for _, vs := range tc.want {
				total += len(vs)
			}
			got := byKey(decode(t, waitRecords(t, addr, out, total, app), serde.String(), serde.Int64()))
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("updates per key:\n got %v\nwant %v", got, tc.want)
			}

			// The changelog holds the plain aggregate, encoded with its
			// serde (for Reduce: V itself, not a wrapper).
			state := changelogState(t, addr, changelogTopic(cfg.AppID, tc.store))
			gotState := make(map[string]int64)
			for k, v := range state {
				n, err := serde.Int64().Deserialize(v)
				if err != nil {
					t.Errorf("changelog value of %q is %x: %v", k, v, err)
					continue
				}
				gotState[k] = n
			}
			if fmt.Sprint(gotState) != fmt.Sprint(tc.state) {
				t.Errorf("changelog state:\n got %v\nwant %v", gotState, tc.state)
			}
			if err := app.stop(t); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}

// storeScript is a processor that runs store commands, one per record, and
// forwards each command with its result.
type storeScript struct {
	spec   eddy.KeyValueStoreSpec[string, string]
	ctx    *eddy.ProcessorContext[string, string]
	kv     *eddy.KeyValueStore[string, string]
	inits  *atomic.Int32
	closes *atomic.Int32
}

func (p *storeScript) Init(ctx *eddy.ProcessorContext[string, string]) error {
	p.inits.Add(1)
	kv, err := p.spec.Open(ctx)
	p.ctx, p.kv = ctx, kv
	return err
}

func (p *storeScript) Close() error {
	p.closes.Add(1)
	return nil
}

func (p *storeScript) Process(rec eddy.Record[string, string]) error {
	var (
		entries []string
		scanned bool
		err     error
	)
	// collect gathers a scan's entries, stopping after limit of them (0:
	// no limit), as a user's range loop would break.
	collect := func(scan iter.Seq2[eddy.KeyValue[string, string], error], limit int) error {
		for kv, err := range scan {
			if err != nil {
				return err
			}
			entries = append(entries, kv.Key+"="+kv.Value)
			if len(entries) == limit {
				break
			}
		}
		return nil
	}
	result := "ok"
	f := strings.Fields(rec.Value)
	switch {
	case len(f) == 3 && f[0] == "put":
		err = p.kv.Put(f[1], f[2])
	case len(f) == 2 && f[0] == "del":
		err = p.kv.Delete(f[1])
	case len(f) == 2 && f[0] == "get":
		v, ok, gerr := p.kv.Get(f[1])
		result, err = v, gerr
		if !ok {
			result = "<none>"
		}
	case len(f) == 3 && f[0] == "range":
		scanned, err = true, collect(p.kv.Range(f[1], f[2]), 0)
	case len(f) == 2 && f[0] == "prefix":
		scanned, err = true, collect(p.kv.Prefix(f[1]), 0)
	case len(f) == 1 && f[0] == "all":
		scanned, err = true, collect(p.kv.All(), 0)
	case len(f) == 2 && f[0] == "first":
		// All, left by the loop after n entries.
		n, _ := strconv.Atoi(f[1])
		scanned, err = true, collect(p.kv.All(), n)
	case len(f) == 2 && f[0] == "shout":
		// Writes to the store from inside a scan of it.
		for kv, serr := range p.kv.Prefix(f[1]) {
			if serr != nil {
				err = serr
				break
			}
			if err = p.kv.Put(kv.Key, strings.ToUpper(kv.Value)); err != nil {
				break
			}
		}
	default:
		return fmt.Errorf("%w: %q", errUnknownCommand, rec.Value)
	}
	if err != nil {
		return err
	}
	if scanned {
		result = strings.Join(entries, ",")
	}
	return p.ctx.Forward(eddy.Record[string, string]{Key: rec.Value, Value: result, Timestamp: rec.Timestamp})
}

// TestProcessorKeyValueStore drives a key-value store through the Processor
// API. The first batch runs against an empty database (reads see only the
// transaction's buffer); the second starts once the first committed, so its
// reads merge the database with the new transaction's writes.
func TestProcessorKeyValueStore(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	in, out := "commands", "results"
	createTopics(t, addr, 1, in, out)

	var inits, closes atomic.Int32
	spec := eddy.NewKeyValueStoreSpec("kv", serde.String(), serde.String())
	topo := eddy.NewTopology()
	results := eddy.Process(eddy.Source(topo, in, serde.String(), serde.String()), "script",
		func() eddy.Processor[string, string, string, string] {
			return &storeScript{spec: spec, inits: &inits, closes: &closes}
		}, spec)
	eddy.To(results, out, serde.String(), serde.String())
	cfg := config(t, addr)
	app := run(t, topo, cfg)

	type step struct{ cmd, want string }
	batches := [][]step{{
		{"put user:1 alice", "ok"},
		{"put user:2 bob", "ok"},
		{"put admin:1 root", "ok"},
		{"put user:3 carol", "ok"},
		{"get user:2", "bob"},
		{"get nobody", "<none>"},
		{"all", "admin:1=root,user:1=alice,user:2=bob,user:3=carol"},
		{"del user:2", "ok"},
		{"get user:2", "<none>"},
		{"prefix user:", "user:1=alice,user:3=carol"},
		{"range admin:0 user:2", "admin:1=root,user:1=alice"},
	}, {
		{"get user:2", "<none>"},
		{"get user:1", "alice"},
		{"put user:0 zed", "ok"},
		{"range user:0 user:3", "user:0=zed,user:1=alice"},
		{"range user:3 user:0", ""},
		{"del admin:1", "ok"},
		{"put user:1 alicia", "ok"},
		{"all", "user:0=zed,user:1=alicia,user:3=carol"},
		{"prefix user:", "user:0=zed,user:1=alicia,user:3=carol"},
		{"prefix admin", ""},
		{"first 2", "user:0=zed,user:1=alicia"},
		{"shout user:", "ok"},
		{"all", "user:0=ZED,user:1=ALICIA,user:3=CAROL"},
		{"put user:2 bob", "ok"},
		{"del user:2", "ok"},
	}}
	var want []string
	for _, batch := range batches {
		var recs []*kgo.Record
		for _, s := range batch {
			recs = append(recs, srec("cmd", s.cmd))
			want = append(want, s.cmd+"="+s.want)
		}
		produce(t, addr, in, recs...)
		got := renderStrings(t, waitRecords(t, addr, out, len(want), app))
		if !slices.Equal(got, want) {
			t.Fatalf("results:\n got %q\nwant %q", got, want)
		}
	}

	// Puts and deletes reach the changelog: the newest record per key is
	// the final value, or a tombstone. user:2 was put and deleted twice:
	// if each pair fell in one transaction, the changelog need not hold
	// it at all (a delete of a key the store did not hold is left out),
	// which restores the same state as a tombstone.
	state := changelogState(t, addr, changelogTopic(cfg.AppID, "kv"))
	wantState := map[string]string{"user:0": "ZED", "user:1": "ALICIA", "user:3": "CAROL", "user:2": "<tombstone>", "admin:1": "<tombstone>"}
	gotState := map[string]string{"user:2": "<tombstone>"}
	for k, v := range state {
		if v == nil {
			gotState[k] = "<tombstone>"
		} else {
			gotState[k] = string(v)
		}
	}
	if fmt.Sprint(gotState) != fmt.Sprint(wantState) {
		t.Errorf("changelog state:\n got %v\nwant %v", gotState, wantState)
	}

	if err := app.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	if i, c := inits.Load(), closes.Load(); i != 1 || c != 1 {
		t.Errorf("one task with records: Init called %d times and Close %d times, want 1 and 1", i, c)
	}
}

// TestTopologyErrors checks that Run rejects a topology it cannot run before
// it contacts a broker, with a message that says why.
func TestTopologyErrors(t *testing.T) {
	t.Parallel()
	source := func(topo *eddy.Topology) eddy.Stream[string, string] {
		return eddy.Source(topo, "in", serde.String(), serde.String())
	}
	rekey := func(k, v string) (string, string) { return v, k }
	cases := []struct {
		name string
		// build describes the topology; built reports whether Err should
		// already report the problem.
		build func(topo *eddy.Topology)
		built bool
		want  []string
	}{
		{
			name: "GroupByKey after Map",
			build: func(topo *eddy.Topology) {
				eddy.Count(eddy.GroupByKey(eddy.Map(source(topo), rekey), serde.String()), "counts")
			},
			built: true,
			want:  []string{"GroupByKey", "Repartition", "GroupBy"},
		},
		{
			name: "GroupByKey after Map then key-preserving operators",
			build: func(topo *eddy.Topology) {
				s := eddy.Filter(eddy.Map(source(topo), rekey), func(string, string) bool { return true })
				s = eddy.MapValues(s, func(_, v string) string { return v })
				eddy.Count(eddy.GroupByKey(s, serde.String()), "counts")
			},
			built: true,
			want:  []string{"Repartition", "GroupBy"},
		},
		{
			name: "GroupByKey after FlatMap",
			build: func(topo *eddy.Topology) {
				s := eddy.FlatMap(source(topo), func(dst []eddy.KeyValue[string, string], k, v string) []eddy.KeyValue[string, string] {
					return append(dst, eddy.KeyValue[string, string]{Key: v, Value: k})
				})
				eddy.GroupByKey(s, serde.String())
			},
			built: true,
			want:  []string{"Repartition", "GroupBy"},
		},
		{
			name: "GroupByKey after Process",
			build: func(topo *eddy.Topology) {
				s := eddy.Process(source(topo), "p", func() eddy.Processor[string, string, string, string] { return nil })
				eddy.GroupByKey(s, serde.String())
			},
			built: true,
			want:  []string{"Repartition", "GroupBy"},
		},
		{
			name:  "no source",
			build: func(*eddy.Topology) {},
			want:  []string{"no source", "eddy.Source"},
		},
		{
			name: "duplicate store name",
			build: func(topo *eddy.Topology) {
				g := eddy.GroupByKey(source(topo), serde.String())
				eddy.Count(g, "counts")
				eddy.Reduce(g, "counts", func(a, _ string) string { return a }, serde.String())
			},
			built: true,
			want:  []string{`store "counts"`, "twice"},
		},
		{
			name: "duplicate store name through Process",
			build: func(topo *eddy.Topology) {
				spec := eddy.NewKeyValueStoreSpec("kv", serde.String(), serde.String())
				other := eddy.NewKeyValueStoreSpec("kv", serde.String(), serde.Int64())
				eddy.Process(source(topo), "p", func() eddy.Processor[string, string, string, string] { return nil }, spec, other)
			},
			built: true,
			want:  []string{`store "kv"`, "twice"},
		},
		{
			name: "store name with a space",
			build: func(topo *eddy.Topology) {
				eddy.Count(eddy.GroupByKey(source(topo), serde.String()), "my counts")
			},
			built: true,
			want:  []string{`"my counts"`},
		},
		{
			name: "same topic sourced twice",
			build: func(topo *eddy.Topology) {
				source(topo)
				eddy.Source(topo, "in", serde.Bytes(), serde.Bytes())
			},
			built: true,
			want:  []string{"in", "source twice"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			topo := eddy.NewTopology()
			tc.build(topo)
			if err := topo.Err(); (err != nil) != tc.built {
				t.Errorf("Topology.Err() = %v; want an error: %v", err, tc.built)
			}
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			// Nothing listens on port 1: Run must fail on the topology
			// before it dials.
			err := eddy.Run(ctx, topo, eddy.Config{
				AppID:    "topology-errors",
				Brokers:  []string{"127.0.0.1:1"},
				StateDir: t.TempDir(),
				Logger:   testLogger(t),
			})
			if err == nil {
				t.Fatal("Run returned nil, want a topology error")
			}
			if missing := errLacks(err, tc.want...); len(missing) > 0 {
				t.Errorf("Run error %q lacks %q", err, missing)
			}
		})
	}
}

// TestMissingSourceTopic: Run does not create source topics; it says which
// one is missing.
func TestMissingSourceTopic(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	topo := eddy.NewTopology()
	eddy.To(eddy.Source(topo, "no-such-topic", serde.String(), serde.String()), "out", serde.String(), serde.String())
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	err := eddy.Run(ctx, topo, config(t, addr))
	if missing := errLacks(err, "no-such-topic"); err == nil || len(missing) > 0 {
		t.Fatalf("Run error %v, want one naming the missing topic no-such-topic", err)
	}
}

// TestDeadLetter sends records whose key or value fails to decode to
// "<topic>.dlq", unchanged and with the reason in headers, and goes on.
func TestDeadLetter(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	in, out := "readings", "doubled"
	createTopics(t, addr, 1, in, out)
	topo := eddy.NewTopology()
	s := eddy.Source(topo, in, serde.Int64(), serde.Int64())
	eddy.To(eddy.MapValues(s, func(_, v int64) int64 { return 2 * v }), out, serde.Int64(), serde.Int64())
	app := run(t, topo, config(t, addr))

	badKey := &kgo.Record{Key: []byte("abc"), Value: i64(20), Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t-1")}}}
	badValue := rec(i64(2), []byte{1, 2, 3})
	produce(t, addr, in, rec(i64(1), i64(10)), badKey, badValue, rec(i64(3), i64(30)))

	got := render(decode(t, waitRecords(t, addr, out, 2, app), serde.Int64(), serde.Int64()))
	if want := []string{"1=20", "3=60"}; !slices.Equal(got, want) {
		t.Errorf("outputs: got %q, want %q", got, want)
	}
	dlq := waitRecords(t, addr, eddy.DeadLetterTopic(in), 2, app)
	if eddy.DeadLetterTopic(in) != in+".dlq" {
		t.Errorf("DeadLetterTopic(%q) = %q", in, eddy.DeadLetterTopic(in))
	}
	if len(dlq) != 2 {
		t.Fatalf("%d dead letters, want 2", len(dlq))
	}
	slices.SortFunc(dlq, func(a, b *kgo.Record) int { return cmp.Compare(offsetHeader(t, a), offsetHeader(t, b)) })
	for i, c := range []struct {
		src     *kgo.Record
		errWant []string
	}{
		{badKey, []string{"key", "8 bytes", "got 3"}},
		{badValue, []string{"value", "8 bytes", "got 3"}},
	} {
		d := dlq[i]
		if string(d.Key) != string(c.src.Key) || string(d.Value) != string(c.src.Value) {
			t.Errorf("dead letter %d: key %x value %x, want the input's %x %x", i, d.Key, d.Value, c.src.Key, c.src.Value)
		}
		wantHeaders := map[string]string{
			eddy.HeaderDLQTopic:     in,
			eddy.HeaderDLQPartition: strconv.Itoa(int(c.src.Partition)),
			eddy.HeaderDLQOffset:    strconv.FormatInt(c.src.Offset, 10),
		}
		for _, h := range c.src.Headers {
			wantHeaders[h.Key] = string(h.Value)
		}
		for k, want := range wantHeaders {
			if v, ok := header(d, k); !ok || v != want {
				t.Errorf("dead letter %d: header %s = %q (present: %v), want %q", i, k, v, ok, want)
			}
		}
		reason, _ := header(d, eddy.HeaderDLQError)
		for _, w := range c.errWant {
			if !strings.Contains(reason, w) {
				t.Errorf("dead letter %d: %s header %q lacks %q", i, eddy.HeaderDLQError, reason, w)
			}
		}
	}
	if err := app.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// offsetHeader is the source offset a dead letter names.
func offsetHeader(t *testing.T, r *kgo.Record) int64 {
	v, _ := header(r, eddy.HeaderDLQOffset)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Errorf("dead letter with %s header %q: %v", eddy.HeaderDLQOffset, v, err)
	}
	return n
}

// TestDecodeErrorFail: with OnDecodeError Fail, a record that does not decode
// stops Run with an error naming its topic, partition and offset, and the
// outputs committed before it stay exactly once.
func TestDecodeErrorFail(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	in, out := "strict", "strict-out"
	createTopics(t, addr, 1, in, out)
	topo := eddy.NewTopology()
	eddy.To(eddy.Source(topo, in, serde.Int64(), serde.String()), out, serde.Int64(), serde.String())
	cfg := config(t, addr)
	cfg.OnDecodeError = eddy.Fail
	app := run(t, topo, cfg)

	produce(t, addr, in, rec(i64(1), []byte("fine")))
	waitRecords(t, addr, out, 1, app)
	bad := produce(t, addr, in, rec([]byte("abc"), []byte("broken")))[0]

	err := app.wait(t)
	if err == nil {
		t.Fatal("Run returned nil after a record failed to decode")
	}
	where := fmt.Sprintf("%s/%d@%d", in, bad.Partition, bad.Offset)
	if missing := errLacks(err, where, "decode"); len(missing) > 0 {
		t.Errorf("Run error %q lacks %q", err, missing)
	}
	t.Logf("Run: %v", err)
	recs := waitRecords(t, addr, out, 1, nil)
	if len(recs) != 1 {
		t.Errorf("%s holds %d records, want 1", out, len(recs))
	}
}

// TestRestartContinuesAggregate stops an app and restarts it on the same
// state directory: the counts continue from the stored state.
func TestRestartContinuesAggregate(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	in, out := "clicks", "click-counts"
	createTopics(t, addr, 4, in, out)
	build := func() *eddy.Topology {
		topo := eddy.NewTopology()
		counts := eddy.Count(eddy.GroupByKey(eddy.Source(topo, in, serde.String(), serde.String()), serde.String()), "clicks")
		eddy.To(eddy.ToStream(counts), out, serde.String(), serde.Int64())
		return topo
	}
	cfg := config(t, addr)
	cfg.TableCacheBytes = eddy.NoTableCache // every count's update, one per click

	app := run(t, build(), cfg)
	produce(t, addr, in, srec("a", "1"), srec("b", "1"), srec("a", "2"), srec("a", "3"), srec("b", "2"))
	waitRecords(t, addr, out, 5, app)
	if err := app.stop(t); err != nil {
		t.Fatalf("first run: %v", err)
	}

	app = run(t, build(), cfg)
	produce(t, addr, in, srec("a", "4"), srec("b", "3"), srec("c", "1"))
	got := byKey(decode(t, waitRecords(t, addr, out, 8, app), serde.String(), serde.Int64()))
	want := map[string][]int64{"a": {1, 2, 3, 4}, "b": {1, 2, 3}, "c": {1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts per key across the restart:\n got %v\nwant %v", got, want)
	}
	if err := app.stop(t); err != nil {
		t.Fatalf("second run: %v", err)
	}

	// The state directory is lost: the same instance rebuilds the counts
	// from the changelog. (The instance id is derived from the state
	// directory unless set, so it is pinned to the first run's.)
	cfg.InstanceID = eddy.InstanceIDFromDir(cfg.StateDir)
	cfg.StateDir = t.TempDir()
	app = run(t, build(), cfg)
	produce(t, addr, in, srec("a", "5"), srec("c", "2"))
	got = byKey(decode(t, waitRecords(t, addr, out, 10, app), serde.String(), serde.Int64()))
	want = map[string][]int64{"a": {1, 2, 3, 4, 5}, "b": {1, 2, 3}, "c": {1, 2}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts per key after a restore from the changelog:\n got %v\nwant %v", got, want)
	}
	if err := app.stop(t); err != nil {
		t.Errorf("third run: %v", err)
	}
}

// undeclaredStore writes to a store that was not passed to Process.
type undeclaredStore struct {
	spec eddy.KeyValueStoreSpec[string, string]
	ctx  *eddy.ProcessorContext[string, string]
	kv   *eddy.KeyValueStore[string, string]
}

func (p *undeclaredStore) Init(ctx *eddy.ProcessorContext[string, string]) error {
	kv, err := p.spec.Open(ctx)
	p.ctx, p.kv = ctx, kv
	return err
}

func (p *undeclaredStore) Process(r eddy.Record[string, string]) error {
	if err := p.kv.Put(r.Key, r.Value); err != nil {
		return err
	}
	return p.ctx.Forward(r)
}

func (p *undeclaredStore) Close() error { return nil }

// TestUndeclaredStore: a processor that opens a store it did not declare
// should get an error, not have its writes logged to another store's
// changelog (the runtime once mapped an unknown store to the first declared
// store's changelog).
func TestUndeclaredStore(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	in, out := "in", "out"
	createTopics(t, addr, 1, in, out)
	declared := eddy.NewKeyValueStoreSpec("declared", serde.String(), serde.String())
	hidden := eddy.NewKeyValueStoreSpec("hidden", serde.String(), serde.String())
	topo := eddy.NewTopology()
	s := eddy.Process(eddy.Source(topo, in, serde.String(), serde.String()), "p",
		func() eddy.Processor[string, string, string, string] { return &undeclaredStore{spec: hidden} }, declared)
	eddy.To(s, out, serde.String(), serde.String())
	cfg := config(t, addr)
	app := run(t, topo, cfg)
	produce(t, addr, in, srec("k", "v"))

	deadline := time.Now().Add(hangGuard)
	for time.Now().Before(deadline) {
		if done, err := app.exited(); done {
			if err == nil || len(errLacks(err, "hidden")) > 0 {
				t.Fatalf("Run returned %v; want an error naming the undeclared store", err)
			}
			if v, ok := changelogState(t, addr, changelogTopic(cfg.AppID, "declared"))["k"]; ok {
				t.Errorf("a write to the undeclared store %q is in the changelog of store %q (value %q)", "hidden", "declared", v)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("Run did not stop on a processor that opens an undeclared store")
}

// An empty key or value is a value, not a null key or a tombstone, from the
// very first record through a sink (a fresh encode buffer once turned the
// first empty value into a tombstone).
func TestEmptyKeysAndValuesStayEmpty(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	createTopics(t, addr, 1, "in", "out")
	topo := eddy.NewTopology()
	eddy.To(eddy.Source(topo, "in", serde.String(), serde.String()), "out", serde.String(), serde.String())
	app := run(t, topo, config(t, addr))
	produce(t, addr, "in", srec("", ""), srec("k", "x"), srec("", ""))
	recs := waitRecords(t, addr, "out", 3, app)
	for i, r := range recs {
		if r.Key == nil || r.Value == nil {
			t.Errorf("output %d: key %#v value %#v; an empty string must stay empty, not null", i, r.Key, r.Value)
		}
	}
}
