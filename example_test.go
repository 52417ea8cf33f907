package eddy_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
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

// Route payments by amount: each record goes to the first branch whose
// predicate holds, the rest to the default branch. Every branch is a typed
// Stream to continue with.
func ExampleSplit() {
	t := eddy.NewTopology()
	payments := eddy.Source(t, "payments", serde.String(), serde.Int64()) // id -> cents
	route := eddy.Split(payments, "by-amount")
	refunds := route.Branch("refund", func(_ string, cents int64) bool { return cents < 0 })
	large := route.Branch("large", func(_ string, cents int64) bool { return cents >= 1_000_00 })
	eddy.To(refunds, "refunds", serde.String(), serde.Int64())
	eddy.To(large, "large-payments", serde.String(), serde.Int64())
	eddy.To(route.Default(), "payments-to-settle", serde.String(), serde.Int64())

	d, _ := eddytest.New(t, eddytest.Options{})
	defer d.Close()
	in := eddytest.Input(d, "payments", serde.String(), serde.Int64())
	in.Pipe("p1", 250, 1)
	in.Pipe("p2", -250, 2)
	in.Pipe("p3", 5_000_00, 3)
	for _, topic := range []string{"refunds", "large-payments", "payments-to-settle"} {
		kvs, _ := eddytest.Output(d, topic, serde.String(), serde.Int64()).ReadKeyValues()
		fmt.Println(topic, kvs)
	}
	// Output:
	// refunds [{p2 -250}]
	// large-payments [{p3 500000}]
	// payments-to-settle [{p1 250}]
}

// Log the records that pass a point of the topology, unchanged.
func ExamplePeek() {
	t := eddy.NewTopology()
	orders := eddy.Source(t, "orders", serde.String(), serde.Int64())
	orders = eddy.Peek(orders, func(id string, cents int64) { fmt.Println("order", id, cents) })
	eddy.To(orders, "orders-copy", serde.String(), serde.Int64())

	d, _ := eddytest.New(t, eddytest.Options{})
	defer d.Close()
	eddytest.Input(d, "orders", serde.String(), serde.Int64()).Pipe("o1", 990, 1)
	// Output: order o1 990
}

// Send each alert to an external system. The call is at least once: after
// a crash the records of the aborted transaction are processed again.
func ExampleForeach() {
	t := eddy.NewTopology()
	alerts := eddy.Source(t, "alerts", serde.String(), serde.String())
	eddy.Foreach(alerts, func(host, msg string) { fmt.Printf("page on-call: %s: %s\n", host, msg) })

	d, _ := eddytest.New(t, eddytest.Options{})
	defer d.Close()
	eddytest.Input(d, "alerts", serde.String(), serde.String()).Pipe("db1", "disk full", 1)
	// Output: page on-call: db1: disk full
}

// Deliver each record to a system that drops repeats: the input record's
// topic, partition and offset make an idempotency key, the same when a
// record is processed again after a crash.
func ExampleForeachWithContext() {
	t := eddy.NewTopology()
	emails := eddy.Source(t, "emails", serde.String(), serde.String())
	eddy.ForeachWithContext(emails, func(rc eddy.RecordContext, to, body string) {
		fmt.Printf("send %s-%d-%d: %s: %s\n", rc.Topic, rc.Partition, rc.Offset, to, body)
	})

	d, _ := eddytest.New(t, eddytest.Options{})
	defer d.Close()
	in := eddytest.Input(d, "emails", serde.String(), serde.String())
	in.Pipe("ann@example.com", "welcome", 1)
	in.Pipe("bob@example.com", "welcome", 2)
	// Output:
	// send emails-0-0: ann@example.com: welcome
	// send emails-0-1: bob@example.com: welcome
}

// Split each order into its items, keyed by the order's customer still:
// the grouping after it needs no repartition topic.
func ExampleFlatMapValues() {
	t := eddy.NewTopology()
	orders := eddy.Source(t, "orders", serde.String(), serde.String()) // customer -> "item,item,..."
	items := eddy.FlatMapValues(orders, func(dst []string, _ string, order string) []string {
		return append(dst, strings.Split(order, ",")...)
	})
	counts := eddy.Count(eddy.GroupByKey(items, serde.String()), "items-per-customer")
	eddy.To(eddy.ToStream(counts), "items-per-customer", serde.String(), serde.Int64())
	fmt.Println("repartition topics:", t.Describe("shop").RepartitionTopics)

	d, _ := eddytest.New(t, eddytest.Options{})
	defer d.Close()
	eddytest.Input(d, "orders", serde.String(), serde.String()).Pipe("ann", "tea,mug", 1)
	kvs, _ := eddytest.Output(d, "items-per-customer", serde.String(), serde.Int64()).ReadKeyValues()
	fmt.Println(kvs)
	// Output:
	// repartition topics: []
	// [{ann 1} {ann 2}]
}

// Drop heartbeats, keep everything else.
func ExampleFilterNot() {
	t := eddy.NewTopology()
	events := eddy.Source(t, "events", serde.String(), serde.String())
	events = eddy.FilterNot(events, func(_, kind string) bool { return kind == "heartbeat" })
	eddy.To(events, "events-without-heartbeats", serde.String(), serde.String())

	d, _ := eddytest.New(t, eddytest.Options{})
	defer d.Close()
	in := eddytest.Input(d, "events", serde.String(), serde.String())
	in.Pipe("a", "heartbeat", 1)
	in.Pipe("a", "login", 2)
	kvs, _ := eddytest.Output(d, "events-without-heartbeats", serde.String(), serde.String()).ReadKeyValues()
	fmt.Println(kvs)
	// Output: [{a login}]
}

// Tag each value with where it was read and a header of the record.
func ExampleMapValuesWithContext() {
	t := eddy.NewTopology()
	logs := eddy.Source(t, "logs", serde.String(), serde.String())
	tagged := eddy.MapValuesWithContext(logs, func(rc eddy.RecordContext, _, line string) string {
		host, _ := rc.Header("host")
		return fmt.Sprintf("%s@%d host=%s ts=%d: %s", rc.Topic, rc.Offset, host, rc.Timestamp, line)
	})
	eddy.To(tagged, "tagged-logs", serde.String(), serde.String())

	d, _ := eddytest.New(t, eddytest.Options{})
	defer d.Close()
	d.PipeRaw("logs", []byte("app"), []byte("started"), 1_700_000_000_000, eddy.Header{Key: "host", Value: []byte("web-1")})
	kvs, _ := eddytest.Output(d, "tagged-logs", serde.String(), serde.String()).ReadKeyValues()
	fmt.Println(kvs[0].Value)
	// Output: logs@0 host=web-1 ts=1700000000000: started
}

// Keep only the records that carry a tenant header.
func ExampleFilterWithContext() {
	t := eddy.NewTopology()
	requests := eddy.Source(t, "requests", serde.String(), serde.String())
	tenanted := eddy.FilterWithContext(requests, func(rc eddy.RecordContext, _, _ string) bool {
		_, ok := rc.Header("tenant")
		return ok
	})
	eddy.To(tenanted, "tenant-requests", serde.String(), serde.String())

	d, _ := eddytest.New(t, eddytest.Options{})
	defer d.Close()
	d.PipeRaw("requests", []byte("r1"), []byte("GET /"), 1)
	d.PipeRaw("requests", []byte("r2"), []byte("GET /a"), 2, eddy.Header{Key: "tenant", Value: []byte("acme")})
	kvs, _ := eddytest.Output(d, "tenant-requests", serde.String(), serde.String()).ReadKeyValues()
	fmt.Println(kvs)
	// Output: [{r2 GET /a}]
}

// audit forwards each record with where it was read and when.
type audit struct {
	ctx *eddy.ProcessorContext[string, string]
}

func (a *audit) Init(ctx *eddy.ProcessorContext[string, string]) error { a.ctx = ctx; return nil }

func (a *audit) Process(rec eddy.Record[string, string]) error {
	rec.Value = fmt.Sprintf("%s read from %s/%d@%d at %d", rec.Value, a.ctx.Topic(), a.ctx.Partition(), a.ctx.Offset(), a.ctx.WallClock())
	return a.ctx.Forward(rec)
}

func (a *audit) Close() error { return nil }

// A processor reads the input record's topic, partition and offset, and the
// wall clock, from its context.
func ExampleProcessorContext_Topic() {
	t := eddy.NewTopology()
	events := eddy.Source(t, "events", serde.String(), serde.String())
	audited := eddy.Process(events, "audit", func() eddy.Processor[string, string, string, string] { return &audit{} })
	eddy.To(audited, "audited", serde.String(), serde.String())

	d, _ := eddytest.New(t, eddytest.Options{WallClock: time.UnixMilli(1_800_000_000_000)})
	defer d.Close()
	eddytest.Input(d, "events", serde.String(), serde.String()).Pipe("e1", "signup", 1)
	kvs, _ := eddytest.Output(d, "audited", serde.String(), serde.String()).ReadKeyValues()
	fmt.Println(kvs[0].Value)
	// Output: signup read from events/0@0 at 1800000000000
}
