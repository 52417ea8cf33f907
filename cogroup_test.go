package eddy_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// The cogroup tests fold into a log of what each adder saw, so the
// expected outputs show which adder took which record, and in what order.

func addClick(_ string, page string, log string) string { return log + "c:" + page + " " }

func addPurchase(_ string, amount int64, log string) string {
	return log + "p:" + strconv.FormatInt(amount, 10) + " "
}

func addFlag(_ string, flag string, log string) string { return log + "f:" + flag + " " }

func emptyLog() string { return "" }

// cogroupTopology folds clicks (string values) and purchases (int64
// values), both keyed by user, into one log per user in the store
// "profiles", written to "profiles".
func cogroupTopology() *eddy.Topology {
	topo := eddy.NewTopology()
	clicks := eddy.GroupByKey(eddy.Source(topo, "clicks", serde.String(), serde.String()), serde.String())
	purchases := eddy.GroupByKey(eddy.Source(topo, "purchases", serde.String(), serde.Int64()), serde.String())
	cg := eddy.CogroupWith(eddy.Cogroup(clicks, addClick), purchases, addPurchase)
	profiles := eddy.CogroupAggregate(cg, "profiles", emptyLog, serde.String())
	eddy.To(eddy.ToStream(profiles), "profiles", serde.String(), serde.String())
	return topo
}

// TestCogroupAggregate: two inputs of different value types, keys
// interleaved, fold into one aggregate per key, each record through its
// own input's adder in arrival order; every update is forwarded with the
// timestamp of the record that made it, and the store holds the last.
func TestCogroupAggregate(t *testing.T) {
	d := newDriver(t, cogroupTopology())
	clicks := eddytest.Input(d, "clicks", serde.String(), serde.String())
	purchases := eddytest.Input(d, "purchases", serde.String(), serde.Int64())
	steps := []func() error{
		func() error { return clicks.Pipe("a", "home", 1) },
		func() error { return purchases.Pipe("b", 30, 2) },
		func() error { return clicks.Pipe("b", "cart", 3) },
		func() error { return purchases.Pipe("a", 5, 4) },
		func() error { return clicks.Pipe("a", "shoes", 5) },
		func() error { return purchases.Pipe("a", 12, 6) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := eddytest.Output(d, "profiles", serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var ts []int64
	for _, r := range recs {
		got = append(got, r.Key+"="+strings.TrimSpace(r.Value))
		ts = append(ts, r.Timestamp)
	}
	want := []string{
		"a=c:home",
		"b=p:30",
		"b=p:30 c:cart",
		"a=c:home p:5",
		"a=c:home p:5 c:shoes",
		"a=c:home p:5 c:shoes p:12",
	}
	if !slices.Equal(got, want) {
		t.Errorf("updates %q, want %q", got, want)
	}
	if wantTS := []int64{1, 2, 3, 4, 5, 6}; !slices.Equal(ts, wantTS) {
		t.Errorf("update timestamps %v, want %v", ts, wantTS)
	}
	checkStore(t, d, "profiles", "a=c:home p:5 c:shoes p:12 ", "b=p:30 c:cart ")
}

// TestCogroupSkipsTombstones: a deleted row of a table's update stream
// folds nothing in and forwards nothing, as in Aggregate.
func TestCogroupSkipsTombstones(t *testing.T) {
	topo := eddy.NewTopology()
	clicks := eddy.GroupByKey(eddy.Source(topo, "clicks", serde.String(), serde.String()), serde.String())
	flags := eddy.GroupByKey(eddy.ToStream(eddy.TableFrom(topo, "flags", "flags", serde.String(), serde.String())), serde.String())
	cg := eddy.CogroupWith(eddy.Cogroup(clicks, addClick), flags, addFlag)
	eddy.To(eddy.ToStream(eddy.CogroupAggregate(cg, "profiles", emptyLog, serde.String())), "profiles", serde.String(), serde.String())
	d := newDriver(t, topo)
	pipeRecords(t, d, []pipe{
		{"flags", "a", val("vip"), 1},
		{"clicks", "a", val("home"), 2},
		{"flags", "a", nil, 3}, // the row's delete: skipped
		{"clicks", "a", val("cart"), 4},
	})
	want := []string{"a=f:vip ", "a=f:vip c:home ", "a=f:vip c:home c:cart "}
	if got := readStrings(t, d, "profiles"); !slices.Equal(got, want) {
		t.Errorf("updates %q, want %q", got, want)
	}
}

// TestCogroupRekeyedInput: an input re-keyed by GroupBy reaches the
// aggregate through its own repartition topic, and its records fold in
// under their new key with those of an input that was already keyed.
func TestCogroupRekeyedInput(t *testing.T) {
	topo := eddy.NewTopology()
	clicks := eddy.GroupByKey(eddy.Source(topo, "clicks", serde.String(), serde.String()), serde.String())
	// orders: order id -> "user:amount", grouped by user.
	orders := eddy.GroupBy(eddy.Source(topo, "orders", serde.String(), serde.String()),
		func(_, v string) string { user, _, _ := strings.Cut(v, ":"); return user },
		"orders-by-user", serde.String(), serde.String())
	addOrder := func(_ string, v string, log string) string {
		_, amount, _ := strings.Cut(v, ":")
		return log + "o:" + amount + " "
	}
	cg := eddy.CogroupWith(eddy.Cogroup(clicks, addClick), orders, addOrder)
	eddy.To(eddy.ToStream(eddy.CogroupAggregate(cg, "profiles", emptyLog, serde.String())), "profiles", serde.String(), serde.String())

	if got := topo.Describe("shop").RepartitionTopics; !slices.Equal(got, []string{"shop-orders-by-user-repartition"}) {
		t.Errorf("repartition topics %q, want the orders' own", got)
	}
	d := newDriver(t, topo)
	pipeRecords(t, d, []pipe{
		{"clicks", "a", val("home"), 1},
		{"orders", "o1", val("b:20"), 2},
		{"orders", "o2", val("a:7"), 3},
		{"clicks", "b", val("cart"), 4},
		{"orders", "o3", val("a:1"), 5},
	})
	want := []string{"a=c:home ", "b=o:20 ", "a=c:home o:7 ", "b=o:20 c:cart ", "a=c:home o:7 o:1 "}
	if got := readStrings(t, d, "profiles"); !slices.Equal(got, want) {
		t.Errorf("updates %q, want %q", got, want)
	}
}

// TestCogroupDescribe: the cogroup is one node whose parents are the
// inputs, followed by the aggregation that owns the store.
func TestCogroupDescribe(t *testing.T) {
	d := cogroupTopology().Describe("shop")
	if len(d.Subtopologies) != 1 {
		t.Fatalf("%d sub-topologies, want 1 (the inputs are co-partitioned)", len(d.Subtopologies))
	}
	nodes := map[string]eddy.NodeDescription{}
	var cogroup, aggregate eddy.NodeDescription
	for _, n := range d.Subtopologies[0].Nodes {
		nodes[n.Name] = n
		switch {
		case strings.HasPrefix(n.Name, "cogroup-"):
			cogroup = n
		case strings.HasPrefix(n.Name, "aggregate-profiles-"):
			aggregate = n
		}
	}
	if len(cogroup.Parents) != 2 || nodes[cogroup.Parents[0]].Topic != "clicks" || nodes[cogroup.Parents[1]].Topic != "purchases" {
		t.Errorf("cogroup node %+v: want the two sources as parents", cogroup)
	}
	if !slices.Equal(aggregate.Parents, []string{cogroup.Name}) || !slices.Equal(aggregate.Stores, []string{"profiles"}) {
		t.Errorf("aggregate node %+v: want the cogroup as parent and the store profiles", aggregate)
	}
}

// TestCogroupWindowAggregate: the inputs fold per key and tumbling window
// into one aggregate; a record of a later window starts a new aggregate
// whichever input it comes from.
func TestCogroupWindowAggregate(t *testing.T) {
	const s = 1000
	for _, tc := range []struct {
		name string
		emit eddy.EmitStrategy
		want []string
	}{
		{"every update", eddy.EmitEveryUpdate, []string{
			"a@0=c:home", "a@0=c:home p:5", "b@0=p:9", "a@10000=c:cart", "a@10000=c:cart p:2",
		}},
		{"final", eddy.EmitFinal, []string{"a@0=c:home p:5", "b@0=p:9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := eddy.NewTopology()
			clicks := eddy.GroupByKey(eddy.Source(topo, "clicks", serde.String(), serde.String()), serde.String())
			purchases := eddy.GroupByKey(eddy.Source(topo, "purchases", serde.String(), serde.Int64()), serde.String())
			cg := eddy.CogroupWith(eddy.Cogroup(clicks, addClick), purchases, addPurchase)
			w := eddy.CogroupWindowedBy(cg, eddy.TumblingWindows(10*time.Second)).Emit(tc.emit)
			out := eddy.CogroupWindowAggregate(w, "windowed-profiles", emptyLog, nil, serde.String())
			eddy.To(eddy.ToStream(out), "out", eddy.WindowedSerde(serde.String()), serde.String())
			d := newDriver(t, topo)
			clk := eddytest.Input(d, "clicks", serde.String(), serde.String())
			pur := eddytest.Input(d, "purchases", serde.String(), serde.Int64())
			for _, step := range []func() error{
				func() error { return clk.Pipe("a", "home", 1*s) },
				func() error { return pur.Pipe("a", 5, 2*s) },
				func() error { return pur.Pipe("b", 9, 3*s) },
				func() error { return clk.Pipe("a", "cart", 12*s) },
				func() error { return pur.Pipe("a", 2, 13*s) },
			} {
				if err := step(); err != nil {
					t.Fatal(err)
				}
			}
			recs, err := eddytest.Output(d, "out", eddy.WindowedSerde(serde.String()), serde.String()).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range recs {
				got = append(got, r.Key.Key+"@"+strconv.FormatInt(r.Key.Window.Start, 10)+"="+strings.TrimSpace(r.Value))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("outputs %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCogroupSessionWindows: sessions merge with the merge function when
// a record of one input bridges two sessions made by the other (out of
// order, within the grace period, which keeps the first session open).
func TestCogroupSessionWindows(t *testing.T) {
	const s = 1000
	topo := eddy.NewTopology()
	clicks := eddy.GroupByKey(eddy.Source(topo, "clicks", serde.String(), serde.String()), serde.String())
	purchases := eddy.GroupByKey(eddy.Source(topo, "purchases", serde.String(), serde.Int64()), serde.String())
	cg := eddy.CogroupWith(eddy.Cogroup(clicks, addClick), purchases, addPurchase)
	w := eddy.CogroupWindowedBy(cg, eddy.SessionWindowsWithGap(5*time.Second).WithGrace(10*time.Second)).Emit(eddy.EmitFinal)
	merge := func(_ string, a, b string) string { return a + b }
	out := eddy.CogroupWindowAggregate(w, "sessions", emptyLog, merge, serde.String())
	eddy.To(eddy.ToStream(out), "out", eddy.WindowedSerde(serde.String()), serde.String())
	d := newDriver(t, topo)
	clk := eddytest.Input(d, "clicks", serde.String(), serde.String())
	pur := eddytest.Input(d, "purchases", serde.String(), serde.Int64())
	for _, step := range []func() error{
		func() error { return clk.Pipe("a", "home", 1*s) },
		func() error { return clk.Pipe("a", "cart", 9*s) },  // a second session: 8s after the first
		func() error { return pur.Pipe("a", 4, 5*s) },       // joins both: they merge
		func() error { return clk.Pipe("a", "exit", 30*s) }, // closes the merged session (9s + 5s + 10s)
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := eddytest.Output(d, "out", eddy.WindowedSerde(serde.String()), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.Key.Key+"@"+strconv.FormatInt(r.Key.Window.Start, 10)+"-"+strconv.FormatInt(r.Key.Window.End, 10)+"="+strings.TrimSpace(r.Value))
	}
	if want := []string{"a@1000-9000=c:home c:cart p:4"}; !slices.Equal(got, want) {
		t.Errorf("outputs %q, want %q", got, want)
	}
}

// TestCogroupTopologyErrors: a cogroup that cannot work is refused when
// the topology is built.
func TestCogroupTopologyErrors(t *testing.T) {
	cases := []struct {
		name  string
		build func(topo *eddy.Topology, g eddy.GroupedStream[string, string])
		want  string
	}{
		{"same input twice", func(_ *eddy.Topology, g eddy.GroupedStream[string, string]) {
			eddy.CogroupAggregate(eddy.CogroupWith(eddy.Cogroup(g, addClick), g, addClick), "p", emptyLog, serde.String())
		}, "already an input of this cogroup"},
		{"no adder", func(_ *eddy.Topology, g eddy.GroupedStream[string, string]) {
			eddy.CogroupAggregate(eddy.Cogroup[string, string, string](g, nil), "p", emptyLog, serde.String())
		}, "no adder given"},
		{"no init", func(_ *eddy.Topology, g eddy.GroupedStream[string, string]) {
			eddy.CogroupAggregate(eddy.Cogroup(g, addClick), "p", nil, serde.String())
		}, "pass an init function"},
		{"another topology", func(_ *eddy.Topology, g eddy.GroupedStream[string, string]) {
			other := eddy.GroupByKey(eddy.Source(eddy.NewTopology(), "other", serde.String(), serde.String()), serde.String())
			eddy.CogroupAggregate(eddy.CogroupWith(eddy.Cogroup(g, addClick), other, addClick), "p", emptyLog, serde.String())
		}, "belongs to another topology"},
		{"sessions without merge", func(_ *eddy.Topology, g eddy.GroupedStream[string, string]) {
			w := eddy.CogroupWindowedBy(eddy.Cogroup(g, addClick), eddy.SessionWindowsWithGap(time.Second))
			eddy.CogroupWindowAggregate(w, "p", emptyLog, nil, serde.String())
		}, "pass a merge function"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topo := eddy.NewTopology()
			tc.build(topo, eddy.GroupByKey(eddy.Source(topo, "in", serde.String(), serde.String()), serde.String()))
			d, err := eddytest.New(topo, eddytest.Options{})
			if err == nil {
				d.Close()
				t.Fatalf("built; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "eddy:") {
				t.Errorf("error %q, want one that starts with eddy: and contains %q", err, tc.want)
			}
		})
	}
}
