package eddy_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// TestGroupTableBy regroups a table of accounts ("region:balance") by
// region and sums the balances with AggregateTable: moving an account,
// changing its balance or deleting it must take its old balance out of
// the old region before adding the new one, as Kafka Streams'
// KTable.groupBy(...).aggregate(adder, subtractor) does.
func TestGroupTableBy(t *testing.T) {
	topo := eddy.NewTopology()
	accounts := eddy.TableFrom(topo, "accounts", "accounts", serde.String(), serde.String())
	byRegion := eddy.GroupTableBy(accounts, func(_ string, v string) (string, int64) {
		region, bal, _ := strings.Cut(v, ":")
		n, _ := strconv.ParseInt(bal, 10, 64)
		return region, n
	}, "by-region", serde.String(), serde.Int64())
	totals := eddy.AggregateTable(byRegion, "totals", func() int64 { return 0 },
		func(_ string, v, agg int64) int64 { return agg + v },
		func(_ string, v, agg int64) int64 { return agg - v }, serde.Int64())
	eddy.To(eddy.ToStream(totals), "out", serde.String(), serde.Int64())

	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := eddytest.Input(d, "accounts", serde.String(), serde.String())
	out := eddytest.Output(d, "out", serde.String(), serde.Int64())
	step := func(name string, pipe func() error, want ...string) {
		t.Helper()
		if err := pipe(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		kvs, err := out.ReadKeyValues()
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(kvs))
		for i, kv := range kvs {
			got[i] = fmt.Sprintf("%s=%d", kv.Key, kv.Value)
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
	put := func(k, v string, ts int64) func() error { return func() error { return in.Pipe(k, v, ts) } }
	step("new account", put("ann", "eu:10", 1), "eu=10")
	step("second account", put("bob", "eu:5", 2), "eu=15")
	step("other region", put("cat", "us:7", 3), "us=7")
	step("balance change", put("ann", "eu:12", 4), "eu=5", "eu=17")
	step("move", put("bob", "us:5", 5), "eu=12", "us=12")
	step("unchanged row sends nothing", put("bob", "us:5", 6))
	step("delete", func() error { return in.PipeTombstone("ann", 7) }, "eu=0")
	step("delete of an unknown key", func() error { return in.PipeTombstone("dan", 8) })
	step("re-create", put("ann", "eu:1", 9), "eu=1")

	prior, err := eddytest.KeyValueStore(d, eddy.NewKeyValueStoreSpec("by-region-prior", serde.String(), serde.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := prior.Get("dan"); err != nil || ok {
		t.Errorf("prior row of a never-seen key: ok=%v err=%v", ok, err)
	}
}

// TestGroupTableByNeedsStore: a table without a store (a join result)
// cannot give its old rows, so GroupTableBy refuses it at build time.
func TestGroupTableByNeedsStore(t *testing.T) {
	topo := eddy.NewTopology()
	l := eddy.TableFrom(topo, "l", "l", serde.String(), serde.String())
	r := eddy.TableFrom(topo, "r", "r", serde.String(), serde.String())
	j := eddy.JoinTables(l, r, eddy.InnerJoin, func(_ string, a string, _ bool, b string, _ bool) string { return a + b })
	g := eddy.GroupTableBy(j, func(k, v string) (string, string) { return v, k }, "g", serde.String(), serde.String())
	eddy.AggregateTable(g, "agg", func() int64 { return 0 },
		func(string, string, int64) int64 { return 0 }, func(string, string, int64) int64 { return 0 }, serde.Int64())
	if err := topo.Err(); err == nil || !strings.Contains(err.Error(), "not kept in a key-value store") {
		t.Fatalf("got %v, want an error naming the missing store", err)
	}
}
