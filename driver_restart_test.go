package eddy_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// restartCase is a topology with state, its input and the topics to
// compare, for TestDriverRestartChangesNoOutput.
type restartCase struct {
	name     string
	topology func() *eddy.Topology
	inputs   []string // topics piped, in turn
	outputs  []string
	values   func(rng *rand.Rand, topic string) string // "" is a tombstone
}

// customerOrder is a value of the "orders" input of the restart cases:
// "customer,amount".
func customerOrder(rng *rand.Rand) string {
	return fmt.Sprint("c", rng.IntN(4), ",", 1+rng.IntN(9))
}

func restartCases() []restartCase {
	str, i64 := serde.String(), serde.Int64()
	customer := func(_, order string) string { c, _, _ := strings.Cut(order, ","); return c }
	amount := func(order string) int64 { _, a, _ := strings.Cut(order, ","); return atoi(a) }
	return []restartCase{{
		name: "ToTable and a materialized filter",
		topology: func() *eddy.Topology {
			topo := eddy.NewTopology()
			latest := eddy.ToTable(eddy.Source(topo, "in", str, str), "latest", str, str)
			big := eddy.FilterTable(latest, func(_, o string) bool { return amount(o) > 3 }, eddy.Materialize("big", str, str))
			eddy.To(eddy.ToStream(big), "out", str, str)
			return topo
		},
		inputs: []string{"in"}, outputs: []string{"out"},
		values: func(rng *rand.Rand, _ string) string {
			if rng.IntN(6) == 0 {
				return ""
			}
			return customerOrder(rng)
		},
	}, {
		name: "cogroup, windowed with EmitFinal and not",
		topology: func() *eddy.Topology {
			topo := eddy.NewTopology()
			a := eddy.GroupByKey(eddy.Source(topo, "a", str, str), str)
			b := eddy.GroupBy(eddy.Source(topo, "b", str, str), customer, "b-by-customer", str, str)
			cg := eddy.CogroupWith(eddy.Cogroup(a, func(_, _ string, n int64) int64 { return n + 1 }), b,
				func(_, o string, n int64) int64 { return n + amount(o) })
			eddy.To(eddy.ToStream(eddy.CogroupAggregate(cg, "totals", func() int64 { return 0 }, i64)), "totals", str, i64)
			w := eddy.CogroupWindowedBy(cg, eddy.TumblingWindows(10*time.Second)).Emit(eddy.EmitFinal)
			eddy.To(eddy.Map(eddy.ToStream(eddy.CogroupWindowAggregate(w, "per-10s", func() int64 { return 0 }, nil, i64)),
				func(k eddy.Windowed[string], n int64) (string, int64) {
					return fmt.Sprint(k.Key, "@", k.Window.Start), n
				}), "windows", str, i64)
			return topo
		},
		inputs: []string{"a", "b"}, outputs: []string{"totals", "windows"},
		values: func(rng *rand.Rand, topic string) string {
			if topic == "a" {
				return "click"
			}
			return customerOrder(rng)
		},
	}, {
		name: "Suppress until the window closes, and until a time limit",
		topology: func() *eddy.Topology {
			topo := eddy.NewTopology()
			in := eddy.GroupByKey(eddy.Source(topo, "in", str, str), str)
			counts := eddy.WindowCount(eddy.WindowedBy(in, eddy.TumblingWindows(10*time.Second).WithGrace(2*time.Second)), "counts")
			finals := eddy.Suppress(counts, "finals", eddy.UntilWindowCloses(eddy.BufferConfig{}), eddy.WindowedSerde(str), i64)
			eddy.To(eddy.Map(eddy.ToStream(finals), func(k eddy.Windowed[string], n int64) (string, int64) {
				return fmt.Sprint(k.Key, "@", k.Window.Start), n
			}), "finals", str, i64)
			totals := eddy.Count(in, "totals")
			limited := eddy.Suppress(totals, "limited", eddy.UntilTimeLimit(5*time.Second, eddy.BufferConfig{MaxRecords: 3, WhenFull: eddy.EmitEarlyWhenFull}), str, i64)
			eddy.To(eddy.ToStream(limited), "limited", str, i64)
			return topo
		},
		inputs: []string{"in"}, outputs: []string{"finals", "limited"},
		values: func(*rand.Rand, string) string { return "v" },
	}, {
		name: "hopping windows, Sliced",
		topology: func() *eddy.Topology {
			topo := eddy.NewTopology()
			in := eddy.GroupByKey(eddy.Source(topo, "in", str, str), str)
			w := eddy.WindowedBy(in, eddy.HoppingWindows(10*time.Second, 4*time.Second).WithGrace(3*time.Second).Sliced()).Emit(eddy.EmitFinal)
			eddy.To(eddy.Map(eddy.ToStream(eddy.WindowCount(w, "counts")), func(k eddy.Windowed[string], n int64) (string, int64) {
				return fmt.Sprint(k.Key, "@", k.Window.Start), n
			}), "counts", str, i64)
			return topo
		},
		inputs: []string{"in"}, outputs: []string{"counts"},
		values: func(*rand.Rand, string) string { return "v" },
	}, {
		name: "foreign-key joins, inner and left",
		topology: func() *eddy.Topology {
			topo := eddy.NewTopology()
			orders := eddy.ToTable(eddy.Source(topo, "orders", str, str), "orders", str, str)
			customers := eddy.ToTable(eddy.Source(topo, "customers", str, str), "customers", str, str)
			for _, kind := range []eddy.JoinKind{eddy.InnerJoin, eddy.LeftJoin} {
				joined := eddy.JoinTablesOnForeignKey(orders, customers, "fk-"+kind.String(), customer, kind,
					func(_, o, region string, ok bool) string { return fmt.Sprint(o, "/", region, "/", ok) })
				eddy.To(eddy.ToStream(joined), "joined-"+kind.String(), str, str)
			}
			return topo
		},
		inputs: []string{"orders", "customers"}, outputs: []string{"joined-inner", "joined-left"},
		values: func(rng *rand.Rand, topic string) string {
			if rng.IntN(7) == 0 {
				return ""
			}
			if topic == "customers" {
				return fmt.Sprint("r", rng.IntN(3))
			}
			return customerOrder(rng)
		},
	}}
}

// TestDriverRestartChangesNoOutput runs each stateful topology over the
// same random input twice in the driver: straight through, and restarted
// (Driver.Restart) after every third record. Its outputs must be the
// same, record for record: what the operators keep across a restart (the
// stores, stream time, the buffers of Suppress, the subscriptions of a
// foreign-key join, the marks of emitted windows) is all they need. The
// operators' own tests check the outputs against hand-computed ones.
func TestDriverRestartChangesNoOutput(t *testing.T) {
	for _, tc := range restartCases() {
		t.Run(tc.name, func(t *testing.T) {
			straight := runRestarting(t, tc, 0)
			restarted := runRestarting(t, tc, 3)
			if len(straight) == 0 {
				t.Fatal("the topology wrote nothing: the case tests nothing")
			}
			t.Logf("%d output records", len(straight))
			if !slices.Equal(straight, restarted) {
				t.Errorf("outputs differ after restarts:\nstraight  %q\nrestarted %q", straight, restarted)
			}
		})
	}
}

// TestDriverRestartLosesMemory: a processor that counts in a variable
// rather than a store starts again from zero after Driver.Restart, so the
// comparison of TestDriverRestartChangesNoOutput does see a restart.
func TestDriverRestartLosesMemory(t *testing.T) {
	tc := restartCase{
		name: "count in memory",
		topology: func() *eddy.Topology {
			topo := eddy.NewTopology()
			counted := eddy.Process(eddy.Source(topo, "in", serde.String(), serde.String()), "count-in-memory",
				func() eddy.Processor[string, string, string, int64] { return &memoryCounter{} })
			eddy.To(counted, "out", serde.String(), serde.Int64())
			return topo
		},
		inputs: []string{"in"}, outputs: []string{"out"},
		values: func(*rand.Rand, string) string { return "v" },
	}
	if slices.Equal(runRestarting(t, tc, 0), runRestarting(t, tc, 3)) {
		t.Fatal("a processor's memory survived Driver.Restart")
	}
}

// memoryCounter forwards how many records it has seen, kept in memory.
type memoryCounter struct {
	ctx  *eddy.ProcessorContext[string, int64]
	seen int64
}

func (m *memoryCounter) Init(ctx *eddy.ProcessorContext[string, int64]) error {
	m.ctx = ctx
	return nil
}

func (m *memoryCounter) Process(r eddy.Record[string, string]) error {
	m.seen++
	return m.ctx.Forward(eddy.Record[string, int64]{Key: r.Key, Value: m.seen, Timestamp: r.Timestamp})
}

func (m *memoryCounter) Close() error { return nil }

// runRestarting pipes tc's input (60 records over its input topics, keys
// k0…k5, a second apart, from a fixed seed) and restarts the driver after
// every restartEvery-th record (0: never); it returns every output record
// as "topic key=value@ts".
func runRestarting(t *testing.T, tc restartCase, restartEvery int) []string {
	t.Helper()
	d, err := eddytest.New(tc.topology(), eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rng := rand.New(rand.NewPCG(7, 11))
	var got []string
	read := func() {
		for _, topic := range tc.outputs {
			recs, err := eddytest.Output(d, topic, serde.Bytes(), serde.Bytes()).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				v := string(r.Value)
				if r.Tombstone {
					v = "<nil>"
				}
				got = append(got, fmt.Sprintf("%s %s=%s@%d", topic, r.Key, v, r.Timestamp))
			}
		}
	}
	for i := range 60 {
		topic := tc.inputs[rng.IntN(len(tc.inputs))]
		key := fmt.Sprint("k", rng.IntN(6))
		if strings.HasPrefix(topic, "customers") {
			key = fmt.Sprint("c", rng.IntN(4))
		}
		var value []byte
		if v := tc.values(rng, topic); v != "" {
			value = []byte(v)
		}
		if err := d.PipeRaw(topic, []byte(key), value, int64(i)*1000); err != nil {
			t.Fatalf("pipe %s %s: %v", topic, key, err)
		}
		read()
		if restartEvery > 0 && (i+1)%restartEvery == 0 {
			if err := d.Restart(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return got
}
