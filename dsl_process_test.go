package eddy_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/serde"
)

// The input of TestDSLThroughKills.
const (
	dslCustomers      = 120
	dslCustomerWrites = 600
	dslOrders         = 800
	dslOrderWrites    = 5_000
	dslPayments       = 5_000
	dslPartitions     = 4
	dslWindow         = time.Minute
	dslGrace          = time.Hour
)

// dslTopology is the topology of TestDSLThroughKills: a foreign-key join,
// a cogroup and Suppress(UntilWindowCloses) in one app.
//
//   - orders (order → "customer,amount", deletes too) join customers
//     (customer → region, deletes too) on the order's customer: the
//     enriched order ("region,amount") goes to "enriched";
//   - the orders, re-keyed by customer, and the payments (customer →
//     amount) are cogrouped per customer and minute into
//     "ordered,paid", suppressed until the window closes: one final
//     statement per customer and minute goes to "statements", keyed
//     "customer@window-start".
func dslTopology() *eddy.Topology {
	topo := eddy.NewTopology()
	str := serde.String()
	orders := eddy.Source(topo, "orders", str, str)
	customers := eddy.TableFrom(topo, "customers", "customers", str, str)
	latestOrders := eddy.ToTable(orders, "orders", str, str)
	enriched := eddy.JoinTablesOnForeignKey(latestOrders, customers, "order-customer",
		func(_, order string) string { customer, _, _ := strings.Cut(order, ","); return customer },
		eddy.InnerJoin,
		func(_, order, region string, _ bool) string {
			_, amount, _ := strings.Cut(order, ",")
			return region + "," + amount
		})
	eddy.To(eddy.ToStream(enriched), "enriched", str, str)

	byCustomer := eddy.GroupBy(eddy.Filter(orders, func(_, order string) bool { return order != "" }),
		func(_, order string) string { customer, _, _ := strings.Cut(order, ","); return customer }, "orders-by-customer", str, str)
	payments := eddy.GroupByKey(eddy.Source(topo, "payments", str, str), str)
	cg := eddy.CogroupWith(eddy.Cogroup(byCustomer, func(_, order string, s string) string {
		_, amount, _ := strings.Cut(order, ",")
		return addStatement(s, amount, "")
	}), payments, func(_, amount string, s string) string { return addStatement(s, "", amount) })
	windows := eddy.CogroupWindowAggregate(eddy.CogroupWindowedBy(cg, eddy.TumblingWindows(dslWindow).WithGrace(dslGrace)),
		"statements", func() string { return "0,0" }, nil, str)
	finals := eddy.Suppress(windows, "statements-final", eddy.UntilWindowCloses(eddy.BufferConfig{}), eddy.WindowedSerde(str), str)
	eddy.To(eddy.Map(eddy.ToStream(finals), func(k eddy.Windowed[string], s string) (string, string) {
		return fmt.Sprint(k.Key, "@", k.Window.Start), s
	}), "statements", str, str)
	return topo
}

// addStatement adds an order's and a payment's amounts (either may be "")
// to a statement "ordered,paid".
func addStatement(s, ordered, paid string) string {
	o, p, _ := strings.Cut(s, ",")
	return fmt.Sprint(atoi(o)+atoi(ordered), ",", atoi(p)+atoi(paid))
}

func atoi(s string) int64 {
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return n
}

// TestDSLChild is the app of TestDSLThroughKills, run in a child process
// that the failpoints SIGKILL. Run alone it skips.
func TestDSLChild(t *testing.T) { childApp(t, "dsl", dslTopology, 200) }

// TestDSLThroughKills runs dslTopology as a process killed by SIGKILL at
// five points of the commit cycle, restarted each time on the same state
// directory, with a broker restart during one run; then it checks every
// output against a reference computed in plain Go from the input:
//
//   - "enriched": each order's last record is the join of its last value
//     with its customer's last region (none when either was deleted), and
//     every record is the join of a value the order had with a region its
//     customer had;
//   - "statements": exactly one statement per customer and minute that
//     had an order or a payment, equal to the sums of those records.
func TestDSLThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the app as a process six times")
	}
	dir := t.TempDir()
	broker, err := kafka.StartBroker(kafka.BrokerConfig{Addr: "127.0.0.1:0", DataDir: dir, SyncWrites: true, DefaultPartitions: dslPartitions})
	if err != nil {
		t.Fatal(err)
	}
	addr := broker.Addr()
	t.Cleanup(func() { broker.Close() })
	createTopics(t, addr, dslPartitions, "orders", "customers", "payments", "enriched", "statements")
	t.Cleanup(func() { logStuckTransactions(t, addr) })

	// The input, stamped over ten minutes of event time two hours ago, in
	// a random order that a seed fixes.
	rng := rand.New(rand.NewPCG(17, 2026))
	base := time.Now().Add(-2 * time.Hour).Truncate(dslWindow)
	at := func(i, n int) time.Time { return base.Add(time.Duration(i) * 10 * time.Minute / time.Duration(n)) }
	customerID := func() string { return fmt.Sprint("c", rng.IntN(dslCustomers)) }
	var customers, orders, payments []*kgo.Record
	regions := map[string][]string{}     // customer → every region it had
	finalRegion := map[string]string{}   // customer → its last region, absent if deleted
	orderValues := map[string][]string{} // order → every value it had
	finalOrder := map[string]string{}    // order → its last value, absent if deleted
	statements := map[string][2]int64{}  // "customer@start" → ordered, paid
	window := func(ts time.Time) int64 { ms := ts.UnixMilli(); return ms - ms%dslWindow.Milliseconds() }
	for i := range dslCustomerWrites {
		c := customerID()
		r := srec(c, fmt.Sprint("r", rng.IntN(5)))
		if i >= dslCustomers && rng.IntN(10) == 0 { // a delete
			r.Value = nil
			delete(finalRegion, c)
		} else {
			regions[c] = append(regions[c], string(r.Value))
			finalRegion[c] = string(r.Value)
		}
		r.Timestamp = at(i, dslCustomerWrites)
		customers = append(customers, r)
	}
	for i := range dslOrderWrites {
		o := fmt.Sprint("o", rng.IntN(dslOrders))
		r := srec(o, fmt.Sprint(customerID(), ",", 1+rng.IntN(1000)))
		r.Timestamp = at(i, dslOrderWrites)
		if _, ok := finalOrder[o]; ok && rng.IntN(12) == 0 { // a delete
			r.Value = nil
			delete(finalOrder, o)
		} else {
			orderValues[o] = append(orderValues[o], string(r.Value))
			finalOrder[o] = string(r.Value)
			customer, amount, _ := strings.Cut(string(r.Value), ",")
			k := fmt.Sprint(customer, "@", window(r.Timestamp))
			s := statements[k]
			s[0] += atoi(amount)
			statements[k] = s
		}
		orders = append(orders, r)
	}
	for i := range dslPayments {
		c := customerID()
		amount := 1 + rng.IntN(500)
		r := srec(c, fmt.Sprint(amount))
		r.Timestamp = at(i, dslPayments)
		k := fmt.Sprint(c, "@", window(r.Timestamp))
		s := statements[k]
		s[1] += int64(amount)
		statements[k] = s
		payments = append(payments, r)
	}
	produce(t, addr, "customers", customers...)
	produce(t, addr, "orders", orders...)
	// The last 40 % of the payments are written while the last run goes
	// on, half before the broker restarts under it and half after.
	early, late := payments[:len(payments)*6/10], payments[len(payments)*6/10:]
	produce(t, addr, "payments", early...)

	// Five kills, one at each point of the commit cycle; then a live run,
	// under which the broker restarts.
	kills := []string{"commit.after-end@10", "commit.before-end@8", "commit.mid-apply@6", "commit.before-changelog@6", "commit.after-apply@4"}
	runKilledThenLiveWith(t, "TestDSLChild", kills, addr, func(run int) {
		if run != len(kills) {
			return
		}
		produce(t, addr, "payments", late[:len(late)/2]...)
		cl := client(t, addr)
		defer cl.Close()
		before := consumed(t, cl, "dsl", "payments")
		for deadline := time.Now().Add(hangGuard); consumed(t, cl, "dsl", "payments") == before; {
			if time.Now().After(deadline) {
				t.Fatalf("the last run committed no payment in %v", hangGuard)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("the broker restarts under the last run: %d of %d payments consumed", consumed(t, cl, "dsl", "payments"), len(payments))
		cl.Close()
		broker.Close()
		broker, err = kafka.StartBroker(kafka.BrokerConfig{Addr: addr, DataDir: dir, SyncWrites: true, DefaultPartitions: dslPartitions})
		if err != nil {
			t.Fatalf("restart the broker: %v", err)
		}
		produce(t, addr, "payments", late[len(late)/2:]...)
	})

	// Every window closes once stream time passes its end and the grace:
	// when the app has consumed every input and repartitioned record, a
	// late payment on each partition moves each task's stream time past
	// them (its own window stays open: it is not in the reference).
	waitConsumed(t, addr, "dsl", "orders", len(orders), nil)
	waitConsumed(t, addr, "dsl", "payments", len(payments), nil)
	waitConsumedAll(t, addr, "dsl", eddy.RepartitionTopic("dsl", "orders-by-customer"))
	flushAt := base.Add(10*time.Minute + dslWindow + dslGrace + time.Minute)
	for p := range int32(dslPartitions) {
		key := keyOnPartition(p, dslPartitions)
		r := srec(key, "0")
		r.Timestamp = flushAt
		produce(t, addr, "payments", r)
	}

	// enriched: the last record per order is the reference's join; every
	// record joins values that the order and its customer had.
	want := map[string]string{}
	for o, v := range finalOrder {
		customer, amount, _ := strings.Cut(v, ",")
		if region, ok := finalRegion[customer]; ok {
			want[o] = region + "," + amount
		}
	}
	// statements: one per window, exact.
	recs := waitRecords(t, addr, "statements", len(statements), nil)
	t.Logf("%d statements, %d orders with a join result", len(statements), len(want))
	got := map[string][]string{}
	for _, p := range decode(t, recs, serde.String(), serde.String()) {
		got[p.Key] = append(got[p.Key], p.Value)
	}
	for k, want := range statements {
		if w := fmt.Sprint(want[0], ",", want[1]); !slices.Equal(got[k], []string{w}) {
			t.Errorf("statement %s: %q, want exactly [%s]", k, got[k], w)
		}
	}
	for k := range got {
		if _, ok := statements[k]; !ok {
			t.Errorf("statement %s: %q, not in the reference", k, got[k])
		}
	}

	var last map[string]string
	for deadline := time.Now().Add(hangGuard); ; {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		recs, err := verify.ReadAll(ctx, []string{addr}, "enriched")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		last = map[string]string{}
		for _, r := range recs {
			o := string(r.Key)
			if r.Value == nil {
				delete(last, o)
				continue
			}
			last[o] = string(r.Value)
			if !joinOfSomeVersions(string(r.Value), orderValues[o], regions) {
				t.Fatalf("enriched %s=%s joins no value order %s had (%q) with a region its customer had", o, r.Value, o, orderValues[o])
			}
		}
		if maps.Equal(last, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !maps.Equal(last, want) {
		for o, w := range want {
			if last[o] != w {
				t.Errorf("enriched %s: last %q, want %q", o, last[o], w)
			}
		}
		for o, g := range last {
			if _, ok := want[o]; !ok {
				t.Errorf("enriched %s: last %q, want none (order or customer deleted)", o, g)
			}
		}
	}
}

// joinOfSomeVersions reports whether enriched ("region,amount") joins one
// of an order's values ("customer,amount") with one of its customer's
// regions.
func joinOfSomeVersions(enriched string, orderValues []string, regions map[string][]string) bool {
	region, amount, _ := strings.Cut(enriched, ",")
	for _, v := range orderValues {
		customer, a, _ := strings.Cut(v, ",")
		if a == amount && slices.Contains(regions[customer], region) {
			return true
		}
	}
	return false
}

// keyOnPartition returns a key that Kafka's default partitioner puts on
// partition p of n.
func keyOnPartition(p, n int32) string {
	for i := 0; ; i++ {
		k := fmt.Sprint("flush-", i)
		if kafka.Murmur2.Partition([]byte(k), n) == p {
			return k
		}
	}
}

// waitConsumedAll waits until group has committed, on every partition of
// topic, an offset past its last committed record.
func waitConsumedAll(t *testing.T, addr, group, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	recs, err := verify.ReadAll(ctx, []string{addr}, topic)
	if err != nil {
		t.Fatal(err)
	}
	lastOffset := map[int32]int64{}
	for _, r := range recs {
		lastOffset[r.Partition] = max(lastOffset[r.Partition], r.Offset)
	}
	cl := client(t, addr)
	defer cl.Close()
	for {
		offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
		done := err == nil
		for p, last := range lastOffset {
			if o, ok := offs.Lookup(topic, p); !ok || o.At <= last {
				done = false
			}
		}
		if done {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("group %s has not consumed %s after %v", group, topic, hangGuard)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logStuckTransactions logs, when the test failed, each partition whose
// last stable offset lags its end (an open transaction holds its
// read_committed readers) and the broker's open transactions: what a hang
// after a broker restart needs to be told from eddy's own.
func logStuckTransactions(t *testing.T, addr string) {
	if !t.Failed() {
		return
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, _ := adm.ListEndOffsets(ctx)
	if offs, err := adm.FetchOffsets(ctx, "dsl"); err == nil {
		offs.Each(func(o kadm.OffsetResponse) {
			if e, ok := ends.Lookup(o.Topic, o.Partition); ok && o.At < e.Offset {
				t.Logf("group dsl at %s/%d: offset %d, end %d", o.Topic, o.Partition, o.At, e.Offset)
			}
		})
	}
	stable, _ := adm.ListCommittedOffsets(ctx)
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := stable.Lookup(o.Topic, o.Partition); ok && s.Offset < o.Offset {
			t.Logf("%s/%d: last stable offset %d, end %d", o.Topic, o.Partition, s.Offset, o.Offset)
		}
	})
	txns, err := adm.ListTransactions(ctx, nil, nil)
	t.Logf("open transactions: %v (%v)", txns, err)
	described, err := adm.DescribeTransactions(ctx, txns.TransactionalIDs()...)
	for _, d := range described {
		t.Logf("transaction %s: state %s, producer %d/%d, partitions %v, started %d", d.TxnID, d.State, d.ProducerID, d.ProducerEpoch, d.Topics, d.StartTimestamp)
	}
	_ = err
}
