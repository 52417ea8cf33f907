package eddy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

// The tests of this file run joins, repartitions and windows against the
// embedded broker with Run, to show the runtime wiring (several sources per
// task, sub-topologies, global stores); eddytest covers their semantics.

// TestRunStreamTableJoin: a task reads partition p of the stream and of
// the table's topic.
func TestRunStreamTableJoin(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 3, "orders", "accounts", "out")
	topo := eddy.NewTopology()
	orders := eddy.Source(topo, "orders", serde.String(), serde.String())
	accounts := eddy.TableFrom(topo, "accounts", "accounts", serde.String(), serde.String())
	joined := eddy.JoinStreamTable(orders, accounts, eddy.LeftJoin, func(_ string, o, name string, ok bool) string {
		return o + "/" + opt(name, ok)
	})
	eddy.To(joined, "out", serde.String(), serde.String())
	// Accounts first, processed before any order is written (with
	// MaxTaskIdle 0 a task does not wait for an input that has nothing on
	// the broker, docs/design.md §5.2): each order then sees its account.
	var acc []*kgo.Record
	for i := 0; i < 20; i++ {
		r := srec(fmt.Sprint("k", i), fmt.Sprint("name", i))
		r.Timestamp = time.UnixMilli(1000)
		acc = append(acc, r)
	}
	produce(t, addr, "accounts", acc...)
	cfg := config(t, addr)
	app := run(t, topo, cfg)
	waitConsumed(t, addr, cfg.AppID, "accounts", len(acc), app)
	var ords []*kgo.Record
	for i := 0; i < 40; i++ {
		r := srec(fmt.Sprint("k", i%25), fmt.Sprint("o", i))
		r.Timestamp = time.UnixMilli(int64(2000 + i))
		ords = append(ords, r)
	}
	produce(t, addr, "orders", ords...)
	got := renderStrings(t, waitRecords(t, addr, "out", 40, app))
	slices.Sort(got)
	var want []string
	for i := 0; i < 40; i++ {
		name := "-"
		if i%25 < 20 {
			name = fmt.Sprint("name", i%25)
		}
		want = append(want, fmt.Sprintf("k%d=o%d/%s", i%25, i, name))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestRunGroupByAndGlobalTable: orders re-keyed by customer through a
// repartition topic and counted; each count is then enriched from a global
// table of customer names.
func TestRunGroupByAndGlobalTable(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 2, "orders", "out")
	createTopics(t, addr, 3, "customers") // a global table need not be co-partitioned
	produce(t, addr, "customers", srec("c1", "Ann"), srec("c2", "Bob"))
	topo := eddy.NewTopology()
	orders := eddy.Source(topo, "orders", serde.String(), serde.String()) // key: order id, value: customer
	counts := eddy.Count(eddy.GroupBy(orders, func(_, c string) string { return c }, "by-customer", serde.String(), serde.String()), "orders-per-customer")
	names := eddy.GlobalTableFrom(topo, "customers", "customers", serde.String(), serde.String())
	named := eddy.JoinGlobal(eddy.ToStream(counts), names, func(c string, _ int64) string { return c }, eddy.LeftJoin,
		func(_ string, n int64, name string, ok bool) string { return fmt.Sprint(opt(name, ok), ":", n) })
	eddy.To(named, "out", serde.String(), serde.String())
	cfg := config(t, addr)
	cfg.TableCacheBytes = eddy.NoTableCache // every count's update, one per order
	app := run(t, topo, cfg)
	var recs []*kgo.Record
	for i := 0; i < 30; i++ {
		recs = append(recs, srec(fmt.Sprint("o", i), fmt.Sprint("c", i%3+1)))
	}
	produce(t, addr, "orders", recs...)
	got := renderStrings(t, waitRecords(t, addr, "out", 30, app))
	final := map[string]string{}
	for _, kv := range got {
		k, v, _ := strings.Cut(kv, "=")
		final[k] = v // out is partitioned by customer: per key in order
	}
	want := map[string]string{"c1": "Ann:10", "c2": "Bob:10", "c3": "-:10"}
	if fmt.Sprint(final) != fmt.Sprint(want) {
		t.Errorf("final counts %v, want %v (all: %q)", final, want, got)
	}
	if len(got) != 30 {
		t.Errorf("%d outputs, want 30", len(got))
	}

	// A customer added while the app runs reaches the global store: keep
	// ordering for c3 until a count comes out with the name.
	produce(t, addr, "customers", srec("c3", "Cat"))
	deadline := time.Now().Add(hangGuard)
	for i := 30; ; i++ {
		produce(t, addr, "orders", srec(fmt.Sprint("o", i), "c3"))
		last := renderStrings(t, waitRecords(t, addr, "out", i+1, app))
		if slices.Contains(last, fmt.Sprintf("c3=Cat:%d", i-19)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the global table never showed c3's name: %q", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
