package eddy_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/plan"
	"github.com/eddy-streams/eddy/serde"
)

// TestRunRepartitionSizedAndPurged: orders (4 partitions) re-keyed by
// customer and joined with a table of 3 partitions: the repartition topic
// gets the table's 3 partitions (not the 4 of the orders or the broker's
// default), every order is joined exactly once, and the repartition
// records the app consumed are deleted after its commits (the topic's log
// start offsets advance), never past what the group committed.
func TestRunRepartitionSizedAndPurged(t *testing.T) {
	addr := startBroker(t) // default: 4 partitions
	createTopics(t, addr, 4, "orders")
	createTopics(t, addr, 3, "customers", "out")
	topo := eddy.NewTopology()
	orders := eddy.Source(topo, "orders", serde.String(), serde.String()) // key: order id, value: customer
	byCustomer := eddy.SelectKey(orders, func(_, c string) string { return c })
	customers := eddy.TableFrom(topo, "customers", "customers", serde.String(), serde.String())
	joined := eddy.JoinStreamTable(byCustomer, customers, eddy.LeftJoin, func(_ string, _ string, name string, ok bool) string {
		return opt(name, ok)
	})
	eddy.To(joined, "out", serde.String(), serde.String())

	cfg := config(t, addr)
	cfg.RepartitionPurgeInterval = 100 * time.Millisecond
	rt, err := plan.Build(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.Repartitions) != 1 {
		t.Fatalf("repartitions %+v, want 1", rt.Repartitions)
	}
	repartition := rt.Repartitions[0].Topic

	var names []*kgo.Record
	for i := 0; i < 6; i++ {
		r := srec(fmt.Sprint("c", i), fmt.Sprint("name", i))
		r.Timestamp = time.UnixMilli(1000)
		names = append(names, r)
	}
	produce(t, addr, "customers", names...)
	app := run(t, topo, cfg)
	waitConsumed(t, addr, cfg.AppID, "customers", len(names), app)
	const n = 80
	var ords []*kgo.Record
	var want []string
	for i := 0; i < n; i++ {
		c := fmt.Sprint("c", i%8) // c6 and c7 have no name
		r := srec(fmt.Sprint("o", i), c)
		r.Timestamp = time.UnixMilli(int64(2000 + i))
		ords = append(ords, r)
		want = append(want, c+"="+opt(fmt.Sprint("name", i%8), i%8 < 6))
	}
	produce(t, addr, "orders", ords...)
	got := renderStrings(t, waitRecords(t, addr, "out", n, app))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("joined:\n got %q\nwant %q", got, want)
	}

	cl := client(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	parts, err := kafka.Partitions(ctx, cl, repartition)
	if err != nil {
		t.Fatal(err)
	}
	if parts[repartition] != 3 {
		t.Errorf("%s has %d partitions, want the table's 3", repartition, parts[repartition])
	}

	// The app consumed all n records of the repartition topic; wait for the
	// purge to move the log start offsets.
	adm := kadm.NewClient(cl)
	waitConsumed(t, addr, cfg.AppID, repartition, n, app)
	for {
		starts, err := adm.ListStartOffsets(ctx, repartition)
		if err != nil {
			t.Fatal(err)
		}
		committed, err := adm.FetchOffsets(ctx, cfg.AppID)
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		starts.Each(func(o kadm.ListedOffset) {
			sum += o.Offset
			if c, ok := committed.Lookup(o.Topic, o.Partition); !ok || o.Offset > c.At {
				t.Fatalf("%s/%d starts at %d, past the group's committed offset (%v, %v)", o.Topic, o.Partition, o.Offset, c.At, ok)
			}
		})
		if sum > 0 {
			t.Logf("the log start offsets of %s sum to %d after the purge (%d records and their commit markers written)", repartition, sum, n)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the log start offsets of %s never moved (hang guard %v)", repartition, hangGuard)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if done, err := app.exited(); done {
		t.Fatalf("the app stopped: %v", err)
	}
}
