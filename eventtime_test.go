package eddy_test

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// year2200 is 2200-01-01T00:00:00Z in ms: a typo'd year, far ahead of any
// wall clock, yet one the Kafka client represents.
const year2200 = 7_258_118_400_000

// windowCounts is a topology counting each key's records in 10 s windows,
// with no grace: a record whose window stream time has closed is late.
func windowCounts(t *testing.T, cfg eddy.Config) (*eddytest.Driver, *eddytest.InputTopic[string, string]) {
	t.Helper()
	topo := eddy.NewTopology()
	src := eddy.Source(topo, "in", serde.String(), serde.String())
	ws := eddy.WindowedBy(eddy.GroupByKey(src, serde.String()), eddy.TumblingWindows(10*time.Second))
	eddy.To(eddy.ToStream(eddy.WindowCount(ws, "counts")), "out", eddy.WindowedSerde(serde.String()), serde.Int64())
	d, err := eddytest.New(topo, eddytest.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, eddytest.Input(d, "in", serde.String(), serde.String())
}

// A record stamped in the year 2200 is more than MaxEventTimeAhead ahead of
// the wall clock: it goes to the dead-letter topic with stage time and
// leaves stream time alone, so the next record, in time, still counts in
// its window instead of being dropped as late.
func TestFarFutureRecordDoesNotMoveStreamTime(t *testing.T) {
	d, in := windowCounts(t, eddy.Config{MaxEventTimeAhead: time.Hour})
	now := d.WallClock().UnixMilli()
	for _, ts := range []int64{now, year2200, now + 1000} {
		if err := in.Pipe("a", "v", ts); err != nil {
			t.Fatalf("pipe at %d: %v", ts, err)
		}
	}
	if n := d.LateRecordsDropped(); n != 0 {
		t.Errorf("%d records dropped as late, want none", n)
	}
	recs, err := eddytest.Output(d, "out", eddy.WindowedSerde(serde.String()), serde.Int64()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[1].Value != 2 || recs[1].Key.Window.Start > now {
		t.Errorf("counts %v, want 1 then 2 in the wall clock's window", recs)
	}
	dlq, err := eddytest.Output(d, "in.dlq", serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// The dead letter takes the producer's clock: a broker may refuse its
	// own time as well.
	if len(dlq) != 1 || dlq[0].Timestamp != now || dlqHeader(dlq[0], eddy.HeaderDLQStage) != "time" ||
		!strings.Contains(dlqHeader(dlq[0], eddy.HeaderDLQError), "7258118400000") ||
		!strings.Contains(dlqHeader(dlq[0], eddy.HeaderDLQError), "MaxEventTimeAhead") {
		t.Fatalf("dead letters %v, want the year-2200 record at the wall clock, with stage time and an error naming its time and MaxEventTimeAhead", dlq)
	}
}

// Without MaxEventTimeAhead, eddytest does not check how far ahead a
// record is (its wall clock is the test's, often far from the records'),
// so a topology tested with any timestamps behaves as before.
func TestEddytestChecksTimeAheadOnlyWhenSet(t *testing.T) {
	d, in := windowCounts(t, eddy.Config{})
	if err := in.Pipe("a", "v", year2200); err != nil {
		t.Fatal(err)
	}
	recs, err := eddytest.Output(d, "out", eddy.WindowedSerde(serde.String()), serde.Int64()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("counts %v, want the year-2200 record counted", recs)
	}
}

// A record's event time may equal the wall clock plus MaxEventTimeAhead;
// one millisecond more is too far.
func TestMaxEventTimeAheadBound(t *testing.T) {
	d, in := windowCounts(t, eddy.Config{MaxEventTimeAhead: time.Minute})
	limit := d.WallClock().UnixMilli() + time.Minute.Milliseconds()
	for _, ts := range []int64{limit, limit + 1} {
		if err := in.Pipe("a", "v", ts); err != nil {
			t.Fatal(err)
		}
	}
	if got := values(t, d, "in.dlq"); len(got) != 1 {
		t.Fatalf("dead letters %v, want the one record past the limit", got)
	}
}

// The input's own eddy.* headers (forged, or left by an earlier dead
// letter) do not reach a dead letter under eddy's names: eddy's headers
// replace them, and the input's are kept renamed original.eddy.*.
func TestDeadLetterReplacesForgedHeaders(t *testing.T) {
	d, _ := pickyDriver(t, eddy.Config{OnProcessError: eddy.DeadLetter})
	err := d.PipeRaw("in", []byte("k"), []byte("bad"), 5, // picky fails it
		eddy.Header{Key: "trace", Value: []byte("t1")},
		eddy.Header{Key: eddy.HeaderDLQError, Value: []byte("forged")},
		eddy.Header{Key: eddy.HeaderDLQOffset, Value: []byte("999")})
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := eddytest.Output(d, "in.dlq", serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(dlq) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dlq))
	}
	count := map[string]int{}
	var got []string
	for _, h := range dlq[0].Headers {
		count[h.Key]++
		got = append(got, h.Key+"="+string(h.Value))
	}
	if count[eddy.HeaderDLQError] != 1 || count[eddy.HeaderDLQOffset] != 1 ||
		dlqHeader(dlq[0], eddy.HeaderDLQError) == "forged" || dlqHeader(dlq[0], eddy.HeaderDLQOffset) != "0" {
		t.Errorf("headers %q, want one eddy.error and one eddy.offset, eddy's own", got)
	}
	if dlqHeader(dlq[0], "original."+eddy.HeaderDLQError) != "forged" || dlqHeader(dlq[0], "original."+eddy.HeaderDLQOffset) != "999" ||
		dlqHeader(dlq[0], "trace") != "t1" {
		t.Errorf("headers %q, want the input's trace kept and its eddy.* headers as original.eddy.*", got)
	}
}

// Against a broker: a record timestamp past what the Kafka client can
// represent (after 2262, where franz-go's time wraps around, to a negative
// time or to a plausible one) is dead-lettered as out of range, with
// stage time, and is not processed; the record after it is.
func TestTimestampOutOfClientRange(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	in, out := "stamps", "copied"
	createTopics(t, addr, 1, in, out)
	topo := eddy.NewTopology()
	eddy.To(eddy.Source(topo, in, serde.String(), serde.String()), out, serde.String(), serde.String())
	a, err := eddy.New(topo, config(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	app := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(app.done)
		app.err = a.Run(ctx)
	}()
	t.Cleanup(func() { app.stop(t) })
	// franz-go's producer wraps such times around too, so these are
	// written as raw batches, as another client would write them.
	produceRaw(t, addr, in, "3000", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()) // read as a negative time
	produceRaw(t, addr, in, "2700", time.Date(2700, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()) // read as the year 2115
	produce(t, addr, in, &kgo.Record{Key: []byte("now"), Value: []byte("x")})
	got := waitRecords(t, addr, out, 1, app)
	dlq := waitRecords(t, addr, eddy.DeadLetterTopic(in), 2, app)
	if len(got) != 1 || string(got[0].Key) != "now" {
		t.Errorf("outputs %v, want only the record of now", decode(t, got, serde.String(), serde.String()))
	}
	if len(dlq) != 2 {
		t.Fatalf("%d dead letters, want 2", len(dlq))
	}
	for _, r := range dlq {
		stage, _ := header(r, eddy.HeaderDLQStage)
		reason, _ := header(r, eddy.HeaderDLQError)
		if stage != "time" || !strings.Contains(reason, "out of range") || !strings.Contains(reason, "2262") {
			t.Errorf("dead letter %s: stage %q, error %q; want stage time and the out-of-range reason", r.Key, stage, reason)
		}
	}
	// The task adds its counts to the metrics once per poll: wait for it.
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(50 * time.Millisecond) {
		n := counterTotal(t, a, "eddy_time_refused_records_total")
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("eddy_time_refused_records_total = %v after %v, want 2", n, hangGuard)
		}
	}
}

// counterTotal sums the series of a counter family of the app's registry.
func counterTotal(t *testing.T, a *eddy.App, name string) float64 {
	t.Helper()
	fams, err := a.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range fams {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// Against a broker: timestamp 0 (the epoch) is a valid event time, and the
// output keeps it rather than taking the wall clock.
func TestTimestampZeroIsKept(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	in, out := "epoch", "copied"
	createTopics(t, addr, 1, in, out)
	topo := eddy.NewTopology()
	eddy.To(eddy.Source(topo, in, serde.String(), serde.String()), out, serde.String(), serde.String())
	app := run(t, topo, config(t, addr))
	produce(t, addr, in, &kgo.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(0)})
	got := waitRecords(t, addr, out, 1, app)
	if ts := got[0].Timestamp.UnixMilli(); ts != 0 {
		t.Fatalf("output timestamp %d (%v), want 0", ts, got[0].Timestamp.UTC())
	}
}

// produceRaw writes one record with key and value "x" at timestamp ts (ms)
// to partition 0 of topic, as a record batch of its own: franz-go's
// producer cannot write a timestamp past 2262, as it goes through an int64
// of nanoseconds.
func produceRaw(t *testing.T, addr, topic, key string, ts int64) {
	t.Helper()
	rec := kmsg.Record{Key: []byte(key), Value: []byte("x")}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1) // what follows the length, a one-byte varint of 0 here
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: rec.AppendTo(nil),
	}
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))                                          // Length: what follows it
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))) // CRC: from the attributes on
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10_000
	part := kmsg.NewProduceRequestTopicPartition()
	part.Records = raw
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.Partitions = topic, []kmsg.ProduceRequestTopicPartition{part}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	// Kafka 3.0's versions: topics by name (by id from produce v13).
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(kversion.V3_0_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatalf("produce a raw batch to %s: %v", topic, err)
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("produce a raw batch to %s/%d: %v", rt.Topic, p.Partition, err)
			}
		}
	}
}
