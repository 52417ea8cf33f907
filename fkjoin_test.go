package eddy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/internal/plan"
	"github.com/eddy-streams/eddy/serde"
)

// orderCustomer is the foreign key of an order "<customer>,<amount>": its
// customer, "" (none) when the order names none.
func orderCustomer(_ string, order string) string {
	customer, _, _ := strings.Cut(order, ",")
	return customer
}

// fkJoinTopology joins orders (order id → "<customer>,<amount>") with
// customers (customer id → region) on the order's customer, as kind, and
// writes "<order>@<region>" ("-" for no customer) to "out".
func fkJoinTopology(kind eddy.JoinKind) *eddy.Topology {
	topo := eddy.NewTopology()
	orders := eddy.TableFrom(topo, "orders", "orders", serde.String(), serde.String())
	customers := eddy.TableFrom(topo, "customers", "customers", serde.String(), serde.String())
	joined := eddy.JoinTablesOnForeignKey(orders, customers, "fk", orderCustomer, kind,
		func(_ string, order, region string, ok bool) string { return order + "@" + opt(region, ok) })
	eddy.To(eddy.ToStream(joined), "out", serde.String(), serde.String())
	return topo
}

// TestForeignKeyJoin walks both kinds through inserts, a right update
// fanning out to the orders that reference it, a foreign key that
// changes (the old customer's updates no longer touch the order, the new
// one's do), deletes on both sides and an order that names no customer.
// Each step's expected results are written by hand, in the order the
// driver produces them: a left update's result comes back through the
// subscription and response topics before the next record is piped.
func TestForeignKeyJoin(t *testing.T) {
	steps := []struct {
		in          pipe
		inner, left []string
	}{
		{pipe{"customers", "c1", val("north"), 1}, nil, nil}, // no order references c1 yet
		{pipe{"orders", "o1", val("c1,10"), 2}, []string{"o1=c1,10@north"}, []string{"o1=c1,10@north"}},
		// c2 does not exist: the inner join's tombstone removes any
		// previous result (there is none here).
		{pipe{"orders", "o2", val("c2,20"), 3}, []string{"o2=nil"}, []string{"o2=c2,20@-"}},
		{pipe{"customers", "c2", val("south"), 4}, []string{"o2=c2,20@south"}, []string{"o2=c2,20@south"}},
		{pipe{"orders", "o3", val("c1,30"), 5}, []string{"o3=c1,30@north"}, []string{"o3=c1,30@north"}},
		// An update of c1 reaches both of its orders.
		{pipe{"customers", "c1", val("east"), 6}, []string{"o1=c1,10@east", "o3=c1,30@east"}, []string{"o1=c1,10@east", "o3=c1,30@east"}},
		// o1 moves from c1 to c2.
		{pipe{"orders", "o1", val("c2,11"), 7}, []string{"o1=c2,11@south"}, []string{"o1=c2,11@south"}},
		// c1's update no longer touches o1.
		{pipe{"customers", "c1", val("west"), 8}, []string{"o3=c1,30@west"}, []string{"o3=c1,30@west"}},
		{pipe{"customers", "c2", val("mid"), 9}, []string{"o1=c2,11@mid", "o2=c2,20@mid"}, []string{"o1=c2,11@mid", "o2=c2,20@mid"}},
		// c2 is deleted: its orders lose their result (inner) or their
		// customer (left).
		{pipe{"customers", "c2", nil, 10}, []string{"o1=nil", "o2=nil"}, []string{"o1=c2,11@-", "o2=c2,20@-"}},
		{pipe{"orders", "o3", nil, 11}, []string{"o3=nil"}, []string{"o3=nil"}},
		// o3 is gone: c1's update reaches no order.
		{pipe{"customers", "c1", val("up"), 12}, nil, nil},
		// o2 names no customer now: no subscription, a result at once.
		{pipe{"orders", "o2", val(",5"), 13}, []string{"o2=nil"}, []string{"o2=,5@-"}},
		// c2 comes back: o1 still references it, o2 no longer does.
		{pipe{"customers", "c2", val("back"), 14}, []string{"o1=c2,11@back"}, []string{"o1=c2,11@back"}},
		// o2 names c1 again.
		{pipe{"orders", "o2", val("c1,6"), 15}, []string{"o2=c1,6@up"}, []string{"o2=c1,6@up"}},
		// o1 moves to c9, which does not exist: its result from c2 goes.
		{pipe{"orders", "o1", val("c9,12"), 16}, []string{"o1=nil"}, []string{"o1=c9,12@-"}},
		{pipe{"customers", "c2", val("gone"), 17}, nil, nil},
		{pipe{"customers", "c9", val("far"), 18}, []string{"o1=c9,12@far"}, []string{"o1=c9,12@far"}},
	}
	for _, kind := range []eddy.JoinKind{eddy.InnerJoin, eddy.LeftJoin} {
		t.Run(kind.String(), func(t *testing.T) {
			d := newDriver(t, fkJoinTopology(kind))
			for i, step := range steps {
				pipeRecords(t, d, []pipe{step.in})
				want := step.inner
				if kind == eddy.LeftJoin {
					want = step.left
				}
				if got := readStrings(t, d, "out"); !slices.Equal(got, want) {
					t.Errorf("step %d (%s %s=%s): got %q, want %q", i, step.in.topic, step.in.key, opt(deref(step.in.value), step.in.value != nil), got, want)
				}
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestForeignKeyJoinDropsStaleResponses replays responses the join wrote
// to its response topic: one that answers an older value of the order
// (an answer overtaken by an update, as happens when both are in flight)
// gives no result, while the response to the current value, replayed,
// gives its result again: the hash, not the replay, makes the difference.
func TestForeignKeyJoinDropsStaleResponses(t *testing.T) {
	d := newDriver(t, fkJoinTopology(eddy.LeftJoin))
	const responses = "eddytest-fk-response-repartition"
	capture := func() [][2][]byte {
		recs, err := eddytest.Output(d, responses, serde.Bytes(), serde.Bytes()).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		var out [][2][]byte
		for _, r := range recs {
			out = append(out, [2][]byte{r.Key, r.Value})
		}
		return out
	}
	replay := func(r [2][]byte) {
		if err := d.PipeRaw(responses, r[0], r[1], 100); err != nil {
			t.Fatal(err)
		}
	}
	pipeRecords(t, d, []pipe{{"customers", "c1", val("north"), 1}, {"orders", "o1", val("c1,10"), 2}})
	first := capture()
	pipeRecords(t, d, []pipe{{"orders", "o1", val("c1,99"), 3}})
	second := capture()
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("responses: %d then %d, want 1 each", len(first), len(second))
	}
	if got, want := readStrings(t, d, "out"), []string{"o1=c1,10@north", "o1=c1,99@north"}; !slices.Equal(got, want) {
		t.Fatalf("results: got %q, want %q", got, want)
	}
	replay(first[0])
	if got := readStrings(t, d, "out"); len(got) != 0 {
		t.Errorf("a response to the older value of o1 gave %q, want nothing", got)
	}
	replay(second[0])
	if got, want := readStrings(t, d, "out"), []string{"o1=c1,99@north"}; !slices.Equal(got, want) {
		t.Errorf("the response to o1's current value gave %q, want %q", got, want)
	}
	// o1 moves to c2, which does not exist: a response from c1 is stale.
	pipeRecords(t, d, []pipe{{"orders", "o1", val("c2,99"), 4}})
	if got, want := readStrings(t, d, "out"), []string{"o1=c2,99@-"}; !slices.Equal(got, want) {
		t.Fatalf("results: got %q, want %q", got, want)
	}
	capture()
	replay(second[0])
	if got := readStrings(t, d, "out"); len(got) != 0 {
		t.Errorf("a response from o1's previous customer gave %q, want nothing", got)
	}
	// o1 is deleted: no response is current.
	pipeRecords(t, d, []pipe{{"orders", "o1", nil, 5}})
	readStrings(t, d, "out")
	replay(second[0])
	if got := readStrings(t, d, "out"); len(got) != 0 {
		t.Errorf("a response for the deleted o1 gave %q, want nothing", got)
	}
}

// TestForeignKeyJoinMaterialized: the result, materialized, holds the join
// of the current rows; a materialized view can be either side.
func TestForeignKeyJoinMaterialized(t *testing.T) {
	topo := eddy.NewTopology()
	orders := eddy.TableFrom(topo, "orders", "orders", serde.String(), serde.String())
	customers := eddy.TableFrom(topo, "customers", "customers", serde.String(), serde.String())
	regions := eddy.MapTableValues(customers, func(_, region string) string { return strings.ToUpper(region) },
		eddy.Materialize("regions", serde.String(), serde.String()))
	joined := eddy.JoinTablesOnForeignKey(orders, regions, "fk", orderCustomer, eddy.InnerJoin,
		func(_ string, order, region string, _ bool) string { return order + "@" + region })
	spec := eddy.NewKeyValueStoreSpec("joined", serde.String(), serde.String())
	eddy.MapTableValues(joined, func(_, v string) string { return v }, eddy.Materialize("joined", serde.String(), serde.String()))
	d := newDriver(t, topo)
	pipeRecords(t, d, []pipe{
		{"orders", "o1", val("c1,1"), 1},
		{"customers", "c1", val("north"), 2},
		{"orders", "o2", val("c1,2"), 3},
		{"orders", "o3", val("c2,3"), 4},
		{"customers", "c2", val("south"), 5},
		{"orders", "o1", val("c2,4"), 6},
		{"customers", "c1", nil, 7},
		{"orders", "o3", nil, 8},
	})
	kv, err := eddytest.KeyValueStore(d, spec)
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
	// o2's customer c1 is gone; o3 is gone.
	if want := []string{"o1=c2,4@SOUTH"}; !slices.Equal(got, want) {
		t.Errorf("joined store: got %q, want %q", got, want)
	}
}

// TestForeignKeyJoinPlan: the subscription topic is written by the
// orders' sub-topology and read by the customers', the response topic the
// other way round, each store in the sub-topology of its side, and the
// description names the join's nodes.
func TestForeignKeyJoinPlan(t *testing.T) {
	topo := fkJoinTopology(eddy.InnerJoin)
	rt, err := plan.Build(topo, eddy.Config{AppID: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.Subtopologies) != 2 {
		t.Fatalf("%d sub-topologies, want 2", len(rt.Subtopologies))
	}
	subOf := func(topic string) int {
		for i, s := range rt.Subtopologies {
			if slices.Contains(s.Sources, topic) {
				return i
			}
		}
		t.Fatalf("no sub-topology reads %s", topic)
		return -1
	}
	left, right := subOf("orders"), subOf("customers")
	if left == right {
		t.Fatal("orders and customers in one sub-topology")
	}
	if got := subOf("app-fk-response-repartition"); got != left {
		t.Errorf("the response topic is read by sub-topology %d, want the orders' (%d)", got, left)
	}
	if got := subOf("app-fk-subscription-repartition"); got != right {
		t.Errorf("the subscription topic is read by sub-topology %d, want the customers' (%d)", got, right)
	}
	writers := map[string][]int{}
	for _, r := range rt.Repartitions {
		writers[r.Topic] = r.Writers
	}
	if w := writers["app-fk-subscription-repartition"]; !slices.Equal(w, []int{left}) {
		t.Errorf("subscription writers %v, want [%d]", w, left)
	}
	if w := writers["app-fk-response-repartition"]; !slices.Equal(w, []int{right}) {
		t.Errorf("response writers %v, want [%d]", w, right)
	}
	stores := func(i int) []string {
		var out []string
		for _, s := range rt.Subtopologies[i].Stores {
			out = append(out, s.Name)
		}
		slices.Sort(out)
		return out
	}
	if got, want := stores(left), []string{"fk-foreign-keys", "orders"}; !slices.Equal(got, want) {
		t.Errorf("orders' stores %q, want %q", got, want)
	}
	if got, want := stores(right), []string{"customers", "fk-subscriptions"}; !slices.Equal(got, want) {
		t.Errorf("customers' stores %q, want %q", got, want)
	}
	desc := topo.Describe("app")
	var names []string
	for _, s := range desc.Subtopologies {
		for _, n := range s.Nodes {
			if strings.HasPrefix(n.Name, "fk-join-") {
				names = append(names, n.Name)
			}
		}
	}
	slices.Sort(names)
	if want := []string{"fk-join-fk-10", "fk-join-fk-subscribe-4", "fk-join-fk-subscriptions-7"}; !slices.Equal(names, want) {
		// The node numbers follow the operators' positions.
		t.Errorf("join nodes %q, want %q", names, want)
	}
	if !slices.Contains(desc.RepartitionTopics, "app-fk-subscription-repartition") || !slices.Contains(desc.RepartitionTopics, "app-fk-response-repartition") {
		t.Errorf("repartition topics %q", desc.RepartitionTopics)
	}
}

// TestForeignKeyJoinTopologyErrors: an outer join, a side without a store
// of its own and a join result as a side are refused when the topology is
// built, with errors that say why.
func TestForeignKeyJoinTopologyErrors(t *testing.T) {
	joiner := func(_ string, order, region string, _ bool) string { return order + region }
	cases := []struct {
		name  string
		build func(topo *eddy.Topology, orders, customers eddy.Table[string, string])
		want  string
	}{
		{"outer", func(_ *eddy.Topology, orders, customers eddy.Table[string, string]) {
			eddy.JoinTablesOnForeignKey(orders, customers, "fk", orderCustomer, eddy.OuterJoin, joiner)
		}, "inner or left, not outer"},
		{"view", func(_ *eddy.Topology, orders, customers eddy.Table[string, string]) {
			view := eddy.FilterTable(customers, func(_, v string) bool { return v != "" })
			eddy.JoinTablesOnForeignKey(orders, view, "fk", orderCustomer, eddy.InnerJoin, joiner)
		}, "the right table of a foreign-key join is a FilterTable or MapTableValues view"},
		{"join result", func(_ *eddy.Topology, orders, customers eddy.Table[string, string]) {
			both := eddy.JoinTables(orders, orders, eddy.InnerJoin, func(_ string, l string, _ bool, _ string, _ bool) string { return l })
			eddy.JoinTablesOnForeignKey(both, customers, "fk", orderCustomer, eddy.InnerJoin, joiner)
		}, "the left table of a join is not kept in a key-value store"},
		{"bad name", func(_ *eddy.Topology, orders, customers eddy.Table[string, string]) {
			eddy.JoinTablesOnForeignKey(orders, customers, "f k", orderCustomer, eddy.InnerJoin, joiner)
		}, `"f k`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topo := eddy.NewTopology()
			orders := eddy.TableFrom(topo, "orders", "orders", serde.String(), serde.String())
			customers := eddy.TableFrom(topo, "customers", "customers", serde.String(), serde.String())
			tc.build(topo, orders, customers)
			_, err := plan.Build(topo, eddy.Config{AppID: "app"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestForeignKeyJoinUnsubscribes: an order that moves to another customer,
// names none, or is deleted, is unsubscribed from its customer, whose
// updates then send it no response at all (the hash would make such a
// response stale; the subscription store must not keep it either).
func TestForeignKeyJoinUnsubscribes(t *testing.T) {
	d := newDriver(t, fkJoinTopology(eddy.LeftJoin))
	responses := eddytest.Output(d, "eddytest-fk-response-repartition", serde.Bytes(), serde.Bytes())
	sent := func() int {
		recs, err := responses.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	pipeRecords(t, d, []pipe{
		{"customers", "c1", val("north"), 1},
		{"orders", "o1", val("c1,1"), 2},
		{"orders", "o2", val("c1,2"), 3},
		{"orders", "o3", val("c1,3"), 4},
	})
	sent()
	pipeRecords(t, d, []pipe{{"customers", "c1", val("east"), 5}})
	if got := sent(); got != 3 {
		t.Fatalf("%d responses to c1's update, want 3 (o1, o2, o3)", got)
	}
	pipeRecords(t, d, []pipe{
		{"orders", "o1", val("c2,1"), 6}, // moves
		{"orders", "o2", val(",2"), 7},   // names none
		{"orders", "o3", nil, 8},         // goes
	})
	sent()
	pipeRecords(t, d, []pipe{{"customers", "c1", val("west"), 9}})
	if got := sent(); got != 0 {
		t.Errorf("%d responses to c1's update after its orders left it, want none", got)
	}
	pipeRecords(t, d, []pipe{{"customers", "c2", val("south"), 10}})
	if got := sent(); got != 1 {
		t.Errorf("%d responses to c2's update, want 1 (o1)", got)
	}
	readStrings(t, d, "out")
}

// TestForeignKeyJoinSelf joins a table with itself: employees (id →
// "<manager id>,<name>") with their manager's row. Both sides live in one
// sub-topology, which writes and reads both of the join's topics.
func TestForeignKeyJoinSelf(t *testing.T) {
	topo := eddy.NewTopology()
	staff := eddy.TableFrom(topo, "staff", "staff", serde.String(), serde.String())
	name := func(row string) string { _, n, _ := strings.Cut(row, ","); return n }
	withManager := eddy.JoinTablesOnForeignKey(staff, staff, "manager", orderCustomer, eddy.LeftJoin,
		func(_ string, row, manager string, ok bool) string {
			if !ok {
				return name(row) + " reports to nobody"
			}
			return name(row) + " reports to " + name(manager)
		})
	eddy.To(eddy.ToStream(withManager), "out", serde.String(), serde.String())
	d := newDriver(t, topo)
	pipeRecords(t, d, []pipe{
		{"staff", "e1", val(",Ada"), 1},
		{"staff", "e2", val("e1,Bob"), 2},
		{"staff", "e3", val("e1,Cy"), 3},
		{"staff", "e1", val(",Ada L."), 4}, // renamed: her reports' results follow
		{"staff", "e3", val("e2,Cy"), 5},   // moves under Bob
		{"staff", "e2", nil, 6},            // Bob leaves
	})
	want := []string{
		"e1=Ada reports to nobody",
		"e2=Bob reports to Ada",
		"e3=Cy reports to Ada",
		"e1=Ada L. reports to nobody",
		"e2=Bob reports to Ada L.",
		"e3=Cy reports to Ada L.",
		"e3=Cy reports to Bob",
		"e2=nil",
		"e3=Cy reports to nobody",
	}
	if got := readStrings(t, d, "out"); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
