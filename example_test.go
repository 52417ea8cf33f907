package eddy_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

// Count page views per user: the input is keyed by user id, so the records
// are already on the partition of their key and GroupByKey needs no
// repartition topic.
func ExampleGroupByKey() {
	t := eddy.NewTopology()
	views := eddy.Source(t, "page-views", serde.String(), serde.String())
	// Filter and MapValues keep the key; Map would not (see
	// ExampleTopology_Err).
	views = eddy.Filter(views, func(_, url string) bool { return !strings.HasPrefix(url, "/health") })
	counts := eddy.Count(eddy.GroupByKey(views, serde.String()), "views-per-user")
	eddy.To(eddy.ToStream(counts), "views-per-user", serde.String(), serde.Int64())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := eddy.Run(ctx, t, eddy.Config{
		AppID:    "page-views",
		Brokers:  []string{"127.0.0.1:9092"},
		StateDir: "/var/lib/page-views",
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Keep the largest reading per sensor. The store and its changelog topic
// ("<app-id>-max-reading-changelog") hold the plain int64.
func ExampleReduce() {
	t := eddy.NewTopology()
	readings := eddy.Source(t, "readings", serde.String(), serde.Int64())
	peaks := eddy.Reduce(eddy.GroupByKey(readings, serde.String()), "max-reading",
		func(peak, v int64) int64 { return max(peak, v) }, serde.Int64())
	eddy.To(eddy.ToStream(peaks), "peak-readings", serde.String(), serde.Int64())
}

// Order totals per customer, with an aggregate of another type than the
// values, stored as JSON.
func ExampleAggregate() {
	type totals struct {
		Orders int64 `json:"orders"`
		Cents  int64 `json:"cents"`
	}
	t := eddy.NewTopology()
	orders := eddy.Source(t, "orders", serde.String(), serde.Int64()) // customer -> cents
	sums := eddy.Aggregate(eddy.GroupByKey(orders, serde.String()), "order-totals",
		func() totals { return totals{} },
		func(_ string, cents int64, agg totals) totals {
			return totals{Orders: agg.Orders + 1, Cents: agg.Cents + cents}
		},
		serde.JSON[totals]())
	eddy.To(eddy.ToStream(sums), "order-totals", serde.String(), serde.JSON[totals]())
}

// Split sentences into words: FlatMap may emit any number of records per
// input, appended to the slice it is given.
func ExampleFlatMap() {
	t := eddy.NewTopology()
	lines := eddy.Source(t, "lines", serde.String(), serde.String())
	words := eddy.FlatMap(lines, func(dst []eddy.KeyValue[string, int64], _ string, line string) []eddy.KeyValue[string, int64] {
		for _, w := range strings.Fields(line) {
			dst = append(dst, eddy.KeyValue[string, int64]{Key: strings.ToLower(w), Value: 1})
		}
		return dst
	})
	// The words are new keys: write them to a topic keyed by word, from
	// which another topology can Source and GroupByKey.
	eddy.To(words, "words", serde.String(), serde.Int64())
}

// dedup forwards the first record of each id and drops the repeats, using a
// key-value store that survives restarts.
type dedup struct {
	spec eddy.KeyValueStoreSpec[string, int64]
	seen *eddy.KeyValueStore[string, int64]
	ctx  *eddy.ProcessorContext[string, string]
}

func (d *dedup) Init(ctx *eddy.ProcessorContext[string, string]) error {
	seen, err := d.spec.Open(ctx)
	d.ctx, d.seen = ctx, seen
	return err
}

func (d *dedup) Process(rec eddy.Record[string, string]) error {
	if _, ok, err := d.seen.Get(rec.Key); err != nil || ok {
		return err
	}
	if err := d.seen.Put(rec.Key, rec.Timestamp); err != nil {
		return err
	}
	return d.ctx.Forward(rec)
}

func (d *dedup) Close() error { return nil }

// The Processor API: a processor with its own state store. Declare the
// store once, pass it to Process, and open it in Init.
func ExampleProcess() {
	seen := eddy.NewKeyValueStoreSpec("seen-ids", serde.String(), serde.Int64())
	t := eddy.NewTopology()
	events := eddy.Source(t, "events", serde.String(), serde.String())
	unique := eddy.Process(events, "dedup", func() eddy.Processor[string, string, string, string] {
		return &dedup{spec: seen}
	}, seen)
	eddy.To(unique, "unique-events", serde.String(), serde.String())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := eddy.Run(ctx, t, eddy.Config{
		AppID:    "dedup",
		Brokers:  []string{"127.0.0.1:9092"},
		StateDir: "/var/lib/dedup",
	}); err != nil {
		log.Fatal(err)
	}
}

// Problems in a topology are collected while it is described; Run reports
// them before it starts. Grouping after a re-key needs a repartition topic,
// which this version does not create.
func ExampleTopology_Err() {
	t := eddy.NewTopology()
	clicks := eddy.Source(t, "clicks", serde.String(), serde.String()) // user -> page
	byPage := eddy.Map(clicks, func(user, page string) (string, string) { return page, user })
	eddy.Count(eddy.GroupByKey(byPage, serde.String()), "clicks-per-page")
	fmt.Println(t.Err())
	// Output:
	// eddy: GroupByKey after map-1 (operator 2 of the topology): it follows an operation that may change the key and the value type (Map, FlatMap, Process): the records may sit on another key's partition and eddy does not know how to encode their values; use eddy.Repartition(s, name, keys, values) before it (or eddy.GroupBy to re-key and group in one step)
}

func ExampleDeadLetterTopic() {
	fmt.Println(eddy.DeadLetterTopic("payments"))
	// Output: payments.dlq
}
