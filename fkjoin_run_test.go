package eddy_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/internal/kafka"
)

// TestRunForeignKeyJoinRestoresState: the join's stores come back from
// their changelogs. The app runs, stops, and starts again on an empty
// state directory; then an order that moves to another customer is
// unsubscribed from the first (the order's foreign key came back from
// "<name>-foreign-keys"), and a customer's update reaches the orders that
// subscribed before the restart, and only them (the subscriptions came
// back from "<name>-subscriptions"): exactly one response per subscriber.
func TestRunForeignKeyJoinRestoresState(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 3, "orders", "out")
	createTopics(t, addr, 2, "customers")
	topo := fkJoinTopology(eddy.LeftJoin)
	at := func(r *kgo.Record, ms int64) *kgo.Record { r.Timestamp = time.UnixMilli(ms); return r }
	produce(t, addr, "customers", at(srec("c1", "north"), 1), at(srec("c2", "south"), 2))
	cfg := config(t, addr)
	cfg.RepartitionPurgeInterval = -1 // the test counts the responses
	app := run(t, topo, cfg)
	waitConsumed(t, addr, cfg.AppID, "customers", 2, app)
	produce(t, addr, "orders", at(srec("o1", "c1,1"), 3), at(srec("o2", "c1,2"), 4), at(srec("o3", "c2,3"), 5))
	waitRecords(t, addr, "out", 3, app)
	if err := app.stop(t); err != nil {
		t.Fatal(err)
	}

	cfg.StateDir = t.TempDir() // nothing on disk: every store is restored
	app = run(t, topo, cfg)
	produce(t, addr, "orders", at(srec("o1", "c2,4"), 6))
	waitRecords(t, addr, "out", 4, app)
	produce(t, addr, "customers", at(srec("c1", "east"), 7))
	waitRecords(t, addr, "out", 5, app)
	produce(t, addr, "customers", at(srec("c2", "west"), 8))
	got := renderStrings(t, waitRecords(t, addr, "out", 7, app))
	want := []string{
		"o1=c1,1@north", "o2=c1,2@north", "o3=c2,3@south",
		"o1=c2,4@south", "o2=c1,2@east", "o1=c2,4@west", "o3=c2,3@west",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("results:\ngot  %q\nwant %q", got, want)
	}
	// 3 first subscriptions, o1's new one, c1's update to o2, c2's to o1
	// and o3: o1, were it still subscribed to c1, would get an eighth.
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	responses, err := verify.ReadAll(ctx, []string{addr}, cfg.AppID+"-fk-response-repartition")
	if err != nil {
		t.Fatal(err)
	}
	if len(responses) != 7 {
		t.Errorf("%d responses, want 7", len(responses))
	}
}

// TestRunForeignKeyJoinAnswersLeftPartition: every answer goes back to the
// partition its order was read from, not to the one Config.Partitioner
// would give the order's key: orders written to other partitions (a
// producer with another partitioner) still get their results, as they
// would in Kafka Streams. The orders' topic is read with the answers'
// only, which are not keyed: it needs no co-partitioning, so even
// FailMisplaced finds nothing misplaced.
func TestRunForeignKeyJoinAnswersLeftPartition(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 3, "orders", "out")
	createTopics(t, addr, 2, "customers")
	produce(t, addr, "customers", srec("c1", "north"), srec("c2", "south"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var orders []*kgo.Record
	var want []string
	for i := range 12 {
		id, customer := fmt.Sprint("o", i), fmt.Sprint("c", 1+i%2)
		r := srec(id, customer+","+fmt.Sprint(i))
		r.Topic = "orders"
		r.Partition = (kafka.Murmur2.Partition(r.Key, 3) + 1 + int32(i%2)) % 3 // never the key's
		orders = append(orders, r)
		want = append(want, fmt.Sprint(id, "=", customer, ",", i, "@", map[string]string{"c1": "north", "c2": "south"}[customer]))
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := cl.ProduceSync(ctx, orders...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := config(t, addr)
	cfg.OnMisplacedRecord = eddy.FailMisplaced
	cfg.PartitionCheckEvery = 1
	app := run(t, fkJoinTopology(eddy.LeftJoin), cfg)
	got := renderStrings(t, waitRecords(t, addr, "out", len(want), app))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("results:\ngot  %q\nwant %q", got, want)
	}
}
