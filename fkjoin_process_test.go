package eddy_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/serde"
)

// Sizes of TestForeignKeyJoinThroughKills's input.
const (
	fkOrderUpdates    = 20_000
	fkOrders          = 1_500
	fkCustomerUpdates = 5_000
	fkCustomers       = 100
	// fkMissing customers are named by orders but never exist.
	fkMissing = 20
)

// fkProcessTopology left-joins orders (order id → "<customer>,<amount>")
// with customers (customer id → region) on the order's customer, keeps
// the result in the store "enriched" and writes every update to
// "enriched".
func fkProcessTopology() *eddy.Topology {
	topo := eddy.NewTopology()
	orders := eddy.TableFrom(topo, "orders", "orders", serde.String(), serde.String())
	customers := eddy.TableFrom(topo, "customers", "customers", serde.String(), serde.String())
	joined := eddy.JoinTablesOnForeignKey(orders, customers, "order-customer", orderCustomer, eddy.LeftJoin,
		func(_ string, order, region string, ok bool) string { return order + "@" + opt(region, ok) })
	enriched := eddy.MapTableValues(joined, func(_, v string) string { return v },
		eddy.Materialize("enriched", serde.String(), serde.String()))
	eddy.To(eddy.ToStream(enriched), "enriched", serde.String(), serde.String())
	return topo
}

// TestForeignKeyJoinChild is the app of TestForeignKeyJoinThroughKills,
// run in a child process that the failpoints SIGKILL. Run alone it skips.
func TestForeignKeyJoinChild(t *testing.T) { childApp(t, "fk-join", fkProcessTopology, 500) }

// TestForeignKeyJoinThroughKills is JoinTablesOnForeignKey's process
// test: orders and customers, on topics of different partition counts,
// with foreign keys that change, orders that name no customer or one
// that never exists, and deletes on both sides, all loaded before the app
// starts; the app SIGKILLed twice by failpoints and restarted on the same
// state directory. Then:
//   - the last result of every order, in the output topic and in the
//     result store's changelog, is the join of its final value with its
//     customer's final region, computed here in plain Go (a tombstone for
//     a deleted order), once the app has consumed all its input: no
//     result is left referencing a customer's older region or an order's
//     older customer;
//   - every result joins a value the order had with a region its customer
//     had (or none);
//   - the subscription topic has the customers' 2 partitions, the
//     response topic the orders' 3;
//   - no result follows an identical one of its order: every order value
//     and region is unique, so a repeat would be a record processed twice.
//     (Tombstones may repeat: each delete of an order gives one, and the
//     values it had in between may have given none, their responses
//     overtaken by the next update.)
func TestForeignKeyJoinThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the app as a process three times")
	}
	addr := startBroker(t)
	// Not co-partitioned: the join's internal topics take each side's
	// count.
	createTopics(t, addr, 3, "orders", "enriched")
	createTopics(t, addr, 2, "customers")

	rng := rand.New(rand.NewPCG(17, 213))
	type event struct {
		customer bool
		key      string
		value    *string
	}
	var events []event
	orders, customers := map[string]string{}, map[string]string{}
	orderValues := map[string]map[string]bool{} // order -> every value it had
	regions := map[string]map[string]bool{}     // customer -> every region it had
	for o, c := 0, 0; o < fkOrderUpdates || c < fkCustomerUpdates; {
		if c < fkCustomerUpdates && (o >= fkOrderUpdates || rng.IntN(fkOrderUpdates+fkCustomerUpdates) < fkCustomerUpdates) {
			id := fmt.Sprint("c", rng.IntN(fkCustomers))
			if _, ok := customers[id]; ok && rng.IntN(10) == 0 {
				delete(customers, id)
				events = append(events, event{customer: true, key: id})
			} else {
				region := fmt.Sprint("r", c)
				customers[id] = region
				if regions[id] == nil {
					regions[id] = map[string]bool{}
				}
				regions[id][region] = true
				events = append(events, event{customer: true, key: id, value: &region})
			}
			c++
			continue
		}
		id := fmt.Sprint("o", rng.IntN(fkOrders))
		if _, ok := orders[id]; ok && rng.IntN(20) == 0 {
			delete(orders, id)
			events = append(events, event{key: id})
		} else {
			customer := ""
			if rng.IntN(20) != 0 { // one order in 20 names no customer
				customer = fmt.Sprint("c", rng.IntN(fkCustomers+fkMissing))
			}
			v := fmt.Sprint(customer, ",", o)
			orders[id] = v
			if orderValues[id] == nil {
				orderValues[id] = map[string]bool{}
			}
			orderValues[id][v] = true
			events = append(events, event{key: id, value: &v})
		}
		o++
	}
	var orderRecs, customerRecs []*kgo.Record
	for i, e := range events {
		var v []byte
		if e.value != nil {
			v = []byte(*e.value)
		}
		r := rec([]byte(e.key), v)
		r.Timestamp = time.UnixMilli(int64(i + 1))
		if e.customer {
			customerRecs = append(customerRecs, r)
		} else {
			orderRecs = append(orderRecs, r)
		}
	}
	produce(t, addr, "orders", orderRecs...)
	produce(t, addr, "customers", customerRecs...)

	// The reference: each order's final result, "" for a tombstone.
	want := map[string]string{}
	for id := range orderValues {
		v, ok := orders[id]
		if !ok {
			want[id] = ""
			continue
		}
		region, found := customers[orderCustomer(id, v)]
		want[id] = v + "@" + opt(region, found && orderCustomer(id, v) != "")
	}

	// An order update crosses three sub-topology steps (the orders' task,
	// the customers' task, the orders' task again): a run makes well over
	// 100 transactions of at most 500 records, so the first run reaches
	// its 55th and the next its 10th.
	runKilledThenLive(t, "TestForeignKeyJoinChild", []string{"commit.after-end@55", "commit.before-end@10"}, addr)

	last := func(recs []*kgo.Record) map[string]string {
		out := map[string]string{}
		for _, r := range recs {
			out[string(r.Key)] = string(r.Value)
		}
		return out
	}
	read := func() []*kgo.Record {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		recs, err := verify.ReadAll(ctx, []string{addr}, "enriched")
		if err != nil {
			t.Fatalf("read enriched: %v", err)
		}
		return recs
	}
	// The results converge on the reference; then, once every input
	// record is consumed, they must still be the reference (what is in
	// flight then only answers the final values).
	for deadline := time.Now().Add(hangGuard); !maps.Equal(last(read()), want); {
		if time.Now().After(deadline) {
			got := last(read())
			n := 0
			for id, w := range want {
				if got[id] != w && n < 10 {
					t.Errorf("last result of %s: %q, want %q", id, got[id], w)
					n++
				}
			}
			t.Fatalf("the results of %d orders (want %d) did not converge on the reference within %v", len(got), len(want), hangGuard)
		}
		time.Sleep(100 * time.Millisecond)
	}
	child := &running{done: make(chan struct{})} // another process: never seen to stop here
	waitConsumed(t, addr, "fk-join", "orders", len(orderRecs), child)
	waitConsumed(t, addr, "fk-join", "customers", len(customerRecs), child)
	recs := read()
	got := last(recs)
	for id, w := range want {
		if got[id] != w {
			t.Errorf("after the input was consumed, last result of %s: %q, want %q", id, got[id], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("results for %d orders, want %d", len(got), len(want))
	}

	prev := map[string]*kgo.Record{}
	for _, r := range recs {
		id := string(r.Key)
		if p := prev[id]; p != nil && r.Value != nil && p.Value != nil && string(p.Value) == string(r.Value) {
			t.Errorf("%s/%d@%d repeats the result %q of %s@%d", r.Topic, r.Partition, r.Offset, r.Value, id, p.Offset)
		}
		prev[id] = r
		if r.Value == nil {
			continue
		}
		order, region, _ := strings.Cut(string(r.Value), "@")
		if !orderValues[id][order] {
			t.Errorf("result %q of %s joins a value the order never had", r.Value, id)
		}
		if customer := orderCustomer(id, order); region != "-" && !regions[customer][region] {
			t.Errorf("result %q of %s joins a region customer %q never had", r.Value, id, customer)
		}
	}

	// The broker's default count is 4: each internal topic took its
	// side's.
	cl := client(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	counts := map[string]int32{"fk-join-order-customer-subscription-repartition": 2, "fk-join-order-customer-response-repartition": 3}
	for topic, want := range counts {
		parts, err := kafka.Partitions(ctx, cl, topic)
		if err != nil {
			t.Fatal(err)
		}
		if parts[topic] != want {
			t.Errorf("%s has %d partitions, want %d", topic, parts[topic], want)
		}
	}

	stored := changelogState(t, addr, changelogTopic("fk-join", "enriched"))
	for id, w := range want {
		v, ok := stored[id]
		if got := string(v); w == "" && ok && v != nil || w != "" && got != w {
			t.Errorf("changelog of enriched: %s=%q, want %q", id, got, w)
		}
	}
	keys := slices.Collect(maps.Keys(stored))
	for _, k := range keys {
		if _, ok := want[k]; !ok {
			t.Errorf("changelog of enriched holds %q, an order never loaded", k)
		}
	}
}
