package eddy_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// open keeps the accounts that are not closed.
func open(_ string, status string) bool { return status != "closed" }

// closed is open's negation, for FilterNotTable.
func closed(_ string, status string) bool { return status == "closed" }

// tableOpVariants runs a test for an operator's view and for its
// materialized result: both must give the same outputs and join lookups.
var tableOpVariants = []struct {
	name  string
	store string // "" for the view
}{{"view", ""}, {"materialized", "kept"}}

func materialize(store string) []eddy.TableOption[string, string] {
	if store == "" {
		return nil
	}
	return []eddy.TableOption[string, string]{eddy.Materialize(store, serde.String(), serde.String())}
}

// checkStore compares a materialized store with want ("key=value"), in
// key order.
func checkStore(t *testing.T, d *eddytest.Driver, store string, want ...string) {
	t.Helper()
	kv, err := eddytest.KeyValueStore(d, eddy.NewKeyValueStoreSpec(store, serde.String(), serde.String()))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for e, err := range kv.All() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Key+"="+e.Value)
	}
	if !slices.Equal(got, want) {
		t.Errorf("store %s holds %q, want %q", store, got, want)
	}
}

// TestFilterTable: an update that fails the predicate is forwarded as a
// tombstone, whatever the key's previous row; FilterNotTable with the
// negated predicate gives the same table.
func TestFilterTable(t *testing.T) {
	in := []pipe{
		{"accounts", "a", val("open"), 1},
		{"accounts", "b", val("closed"), 2},     // filtered out: a delete
		{"accounts", "a", val("closed"), 3},     // an update turned into a delete
		{"accounts", "a", val("reopened"), 4},   // back
		{"accounts", "a", nil, 5},               // a delete stays a delete
		{"accounts", "b", val("open"), 6},       // b enters the table
		{"accounts", "c", val("closed"), 7},     // never in the table: a delete still
		{"accounts", "b", val("open-again"), 8}, // an update that passes
	}
	want := []string{"a=open", "b=nil", "a=nil", "a=reopened", "a=nil", "b=open", "c=nil", "b=open-again"}
	ops := map[string]func(eddy.Table[string, string], ...eddy.TableOption[string, string]) eddy.Table[string, string]{
		"FilterTable": func(tb eddy.Table[string, string], o ...eddy.TableOption[string, string]) eddy.Table[string, string] {
			return eddy.FilterTable(tb, open, o...)
		},
		"FilterNotTable": func(tb eddy.Table[string, string], o ...eddy.TableOption[string, string]) eddy.Table[string, string] {
			return eddy.FilterNotTable(tb, closed, o...)
		},
	}
	for name, op := range ops {
		for _, v := range tableOpVariants {
			t.Run(name+"/"+v.name, func(t *testing.T) {
				topo := eddy.NewTopology()
				accounts := eddy.TableFrom(topo, "accounts", "accounts", serde.String(), serde.String())
				kept := op(accounts, materialize(v.store)...)
				if kept.StoreName() != v.store {
					t.Errorf("StoreName %q, want %q", kept.StoreName(), v.store)
				}
				eddy.To(eddy.ToStream(kept), "out", serde.String(), serde.String())
				d := newDriver(t, topo)
				pipeRecords(t, d, in)
				if got := readStrings(t, d, "out"); !slices.Equal(got, want) {
					t.Errorf("got  %q\nwant %q", got, want)
				}
				if v.store != "" {
					checkStore(t, d, v.store, "b=open-again")
				}
			})
		}
	}
}

// TestFilteredTableJoins: a join downstream of a filtered table drops a
// key whose row was filtered out (the tombstone), and its lookups of the
// filtered side apply the predicate (the view computes on read).
func TestFilteredTableJoins(t *testing.T) {
	for _, v := range tableOpVariants {
		t.Run("JoinTables/"+v.name, func(t *testing.T) {
			topo := eddy.NewTopology()
			accounts := eddy.TableFrom(topo, "accounts", "accounts", serde.String(), serde.String())
			names := eddy.TableFrom(topo, "names", "names", serde.String(), serde.String())
			joined := eddy.JoinTables(eddy.FilterTable(accounts, open, materialize(v.store)...), names, eddy.InnerJoin,
				func(_ string, status string, _ bool, name string, _ bool) string { return status + "/" + name })
			eddy.To(eddy.ToStream(joined), "out", serde.String(), serde.String())
			d := newDriver(t, topo)
			pipeRecords(t, d, []pipe{
				{"names", "a", val("Ann"), 1},
				{"accounts", "a", val("open"), 2},   // a=open/Ann
				{"accounts", "a", val("closed"), 3}, // the filter's tombstone removes the result
				{"names", "a", val("Anna"), 4},      // the lookup finds a closed account: no row
				{"accounts", "a", val("open"), 5},   // a=open/Anna
			})
			want := []string{"a=open/Ann", "a=nil", "a=open/Anna"}
			if got := readStrings(t, d, "out"); !slices.Equal(got, want) {
				t.Errorf("got  %q\nwant %q", got, want)
			}
		})
		t.Run("JoinStreamTable/"+v.name, func(t *testing.T) {
			topo := eddy.NewTopology()
			orders := eddy.Source(topo, "orders", serde.String(), serde.String())
			accounts := eddy.TableFrom(topo, "accounts", "accounts", serde.String(), serde.String())
			joined := eddy.JoinStreamTable(orders, eddy.FilterTable(accounts, open, materialize(v.store)...), eddy.LeftJoin,
				func(_ string, o, status string, ok bool) string { return o + "/" + opt(status, ok) })
			eddy.To(joined, "out", serde.String(), serde.String())
			d := newDriver(t, topo)
			pipeRecords(t, d, []pipe{
				{"accounts", "a", val("open"), 1},
				{"orders", "a", val("o1"), 2},
				{"accounts", "a", val("closed"), 3},
				{"orders", "a", val("o2"), 4},
				{"accounts", "a", val("open"), 5},
				{"orders", "a", val("o3"), 6},
			})
			want := []string{"a=o1/open", "a=o2/-", "a=o3/open"}
			if got := readStrings(t, d, "out"); !slices.Equal(got, want) {
				t.Errorf("got  %q\nwant %q", got, want)
			}
		})
	}
}

// TestMapTableValues: updates carry the mapped value, deletions stay
// deletions, and a join looking up the mapped table (a view of a filtered
// view, or a materialized store) sees mapped values of kept rows only.
func TestMapTableValues(t *testing.T) {
	for _, v := range tableOpVariants {
		t.Run(v.name, func(t *testing.T) {
			topo := eddy.NewTopology()
			orders := eddy.Source(topo, "orders", serde.String(), serde.String())
			accounts := eddy.TableFrom(topo, "accounts", "accounts", serde.String(), serde.String())
			upper := eddy.MapTableValues(eddy.FilterTable(accounts, open), func(k, status string) string {
				return k + ":" + strings.ToUpper(status)
			}, materialize(v.store)...)
			eddy.To(eddy.ToStream(upper), "updates", serde.String(), serde.String())
			joined := eddy.JoinStreamTable(orders, upper, eddy.LeftJoin,
				func(_ string, o, acc string, ok bool) string { return o + "/" + opt(acc, ok) })
			eddy.To(joined, "out", serde.String(), serde.String())
			d := newDriver(t, topo)
			pipeRecords(t, d, []pipe{
				{"accounts", "a", val("open"), 1},
				{"accounts", "b", val("gold"), 2},
				{"orders", "a", val("o1"), 3},
				{"accounts", "a", val("closed"), 4},
				{"orders", "a", val("o2"), 5},
				{"accounts", "b", nil, 6},
				{"orders", "b", val("o3"), 7},
				{"accounts", "a", val("silver"), 8},
				{"orders", "a", val("o4"), 9},
			})
			wantUpdates := []string{"a=a:OPEN", "b=b:GOLD", "a=nil", "b=nil", "a=a:SILVER"}
			if got := readStrings(t, d, "updates"); !slices.Equal(got, wantUpdates) {
				t.Errorf("updates: got  %q\nwant %q", got, wantUpdates)
			}
			want := []string{"a=o1/a:OPEN", "a=o2/-", "b=o3/-", "a=o4/a:SILVER"}
			if got := readStrings(t, d, "out"); !slices.Equal(got, want) {
				t.Errorf("joined: got  %q\nwant %q", got, want)
			}
			if v.store != "" {
				checkStore(t, d, v.store, "a=a:SILVER")
			}
		})
	}
}

// TestToTable: the latest value per key, a tombstone deletes (here from a
// table's update stream, the stream that carries them), every record is
// forwarded as an update.
func TestToTable(t *testing.T) {
	topo := eddy.NewTopology()
	updates := eddy.ToStream(eddy.TableFrom(topo, "in", "in", serde.String(), serde.String()))
	marked := eddy.MapValues(updates, func(_, v string) string { return v + "!" })
	latest := eddy.ToTable(marked, "latest", serde.String(), serde.String())
	if latest.StoreName() != "latest" {
		t.Errorf("StoreName %q", latest.StoreName())
	}
	eddy.To(eddy.ToStream(latest), "out", serde.String(), serde.String())
	d := newDriver(t, topo)
	pipeRecords(t, d, []pipe{
		{"in", "a", val("1"), 1},
		{"in", "b", val("1"), 2},
		{"in", "a", val("2"), 3},
		{"in", "c", val("1"), 4},
		{"in", "c", nil, 5}, // deleted
		{"in", "d", nil, 6}, // a delete of a key never seen
		{"in", "a", val("3"), 7},
	})
	want := []string{"a=1!", "b=1!", "a=2!", "c=1!", "c=nil", "d=nil", "a=3!"}
	if got := readStrings(t, d, "out"); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	checkStore(t, d, "latest", "a=3!", "b=1!")
	if desc := topo.Describe("app"); len(desc.RepartitionTopics) != 0 {
		t.Errorf("repartition topics %v for a stream whose key did not change", desc.RepartitionTopics)
	}
}

// TestToTableRekeyed: after Map, which may change the key and the value
// type, ToTable repartitions with the serdes it is given, so each key's
// latest value is in one task; a join reads the table.
func TestToTableRekeyed(t *testing.T) {
	topo := eddy.NewTopology()
	clicks := eddy.Source(topo, "clicks", serde.String(), serde.String()) // user -> page
	byPage := eddy.Map(clicks, func(user, page string) (string, int64) { return page, int64(len(user)) })
	last := eddy.ToTable(byPage, "last-by-page", serde.String(), serde.Int64())
	if err := topo.Err(); err != nil {
		t.Fatal(err)
	}
	views := eddy.Source(topo, "views", serde.String(), serde.String()) // page -> viewer
	joined := eddy.JoinStreamTable(views, last, eddy.LeftJoin, func(_ string, viewer string, n int64, ok bool) string {
		if !ok {
			return viewer + "/-"
		}
		return viewer + "/" + strings.Repeat("x", int(n))
	})
	eddy.To(joined, "out", serde.String(), serde.String())
	if got := topo.Describe("app").RepartitionTopics; len(got) != 1 || !strings.HasPrefix(got[0], "app-rekey-") {
		t.Errorf("repartition topics %v, want one rekey topic", got)
	}
	d := newDriver(t, topo)
	pipeRecords(t, d, []pipe{
		{"clicks", "ann", val("/home"), 1},
		{"clicks", "robert", val("/home"), 2},
		{"clicks", "al", val("/cart"), 3},
		{"views", "/home", val("v1"), 4},
		{"views", "/cart", val("v2"), 5},
		{"views", "/faq", val("v3"), 6},
	})
	want := []string{"/home=v1/xxxxxx", "/cart=v2/xx", "/faq=v3/-"}
	if got := readStrings(t, d, "out"); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	kv, err := eddytest.KeyValueStore(d, eddy.NewKeyValueStoreSpec("last-by-page", serde.String(), serde.Int64()))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok, err := kv.Get("/home"); err != nil || !ok || n != 6 {
		t.Errorf("last-by-page /home: %d %v %v, want 6", n, ok, err)
	}
}

// TestTableViewNeedsStore: a view of a table kept in no store (a join
// result) cannot be looked up, so a join of it is refused at build time;
// Materialize gives it a store, and the join is accepted.
func TestTableViewNeedsStore(t *testing.T) {
	build := func(opts ...eddy.TableOption[string, string]) error {
		topo := eddy.NewTopology()
		l := eddy.TableFrom(topo, "l", "l", serde.String(), serde.String())
		r := eddy.TableFrom(topo, "r", "r", serde.String(), serde.String())
		j := eddy.JoinTables(l, r, eddy.InnerJoin, func(_ string, a string, _ bool, b string, _ bool) string { return a + b })
		s := eddy.Source(topo, "s", serde.String(), serde.String())
		out := eddy.JoinStreamTable(s, eddy.FilterTable(j, open, opts...), eddy.InnerJoin, func(_, a, b string, _ bool) string { return a + b })
		eddy.To(out, "out", serde.String(), serde.String())
		return topo.Err()
	}
	if err := build(); err == nil || !strings.Contains(err.Error(), "Materialize") {
		t.Errorf("a join of a view of a join result: got %v, want an error that names Materialize", err)
	}
	if err := build(eddy.Materialize("kept", serde.String(), serde.String())); err != nil {
		t.Errorf("a join of a materialized filter of a join result: %v", err)
	}
}

// TestTableOpsDescribe: the operators are nodes of the description; a
// materialized one owns its store, a view none.
func TestTableOpsDescribe(t *testing.T) {
	topo := eddy.NewTopology()
	accounts := eddy.TableFrom(topo, "accounts", "accounts", serde.String(), serde.String())
	view := eddy.FilterNotTable(accounts, closed)
	upper := eddy.MapTableValues(view, func(_, v string) string { return strings.ToUpper(v) }, eddy.Materialize("upper", serde.String(), serde.String()))
	latest := eddy.ToTable(eddy.ToStream(upper), "latest", serde.String(), serde.String())
	eddy.To(eddy.ToStream(eddy.FilterTable(latest, open)), "out", serde.String(), serde.String())
	d := topo.Describe("app")
	if len(d.Subtopologies) != 1 {
		t.Fatalf("%d sub-topologies, want 1", len(d.Subtopologies))
	}
	stores := map[string][]string{}
	var names []string
	for _, n := range d.Subtopologies[0].Nodes {
		prefix := n.Name[:strings.LastIndex(n.Name, "-")]
		names = append(names, prefix)
		stores[prefix] = n.Stores
	}
	want := []string{"source-accounts", "table-accounts", "table-filter-not", "table-map-values", "to-table-latest", "table-filter", "sink-out"}
	if !slices.Equal(names, want) {
		t.Errorf("nodes %q, want %q", names, want)
	}
	for node, st := range map[string][]string{"table-filter-not": nil, "table-map-values": {"upper"}, "to-table-latest": {"latest"}, "table-filter": nil} {
		if !slices.Equal(stores[node], st) {
			t.Errorf("node %s owns stores %q, want %q", node, stores[node], st)
		}
	}
}

// TestGroupFilteredTable: regrouping a filtered table, a row filtered out
// leaves its group (the filter's tombstone subtracts its old value).
func TestGroupFilteredTable(t *testing.T) {
	topo := eddy.NewTopology()
	accounts := eddy.TableFrom(topo, "accounts", "accounts", serde.String(), serde.String()) // id -> region, or "closed"
	byRegion := eddy.GroupTableBy(eddy.FilterTable(accounts, open), func(_, region string) (string, string) { return region, "" },
		"by-region", serde.String(), serde.String())
	counts := eddy.AggregateTable(byRegion, "counts", func() int64 { return 0 },
		func(_, _ string, n int64) int64 { return n + 1 }, func(_, _ string, n int64) int64 { return n - 1 }, serde.Int64())
	eddy.To(eddy.ToStream(counts), "out", serde.String(), serde.Int64())
	d := newDriver(t, topo)
	in := eddytest.Input(d, "accounts", serde.String(), serde.String())
	for i, kv := range [][2]string{{"a", "eu"}, {"b", "eu"}, {"a", "closed"}, {"a", "us"}, {"c", "closed"}} {
		if err := in.Pipe(kv[0], kv[1], int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	kvs, err := eddytest.Output(d, "out", serde.String(), serde.Int64()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range kvs {
		got = append(got, kv.Key+"="+strconv.FormatInt(kv.Value, 10))
	}
	want := []string{"eu=1", "eu=2", "eu=1", "us=1"}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
