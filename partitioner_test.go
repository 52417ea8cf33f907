package eddy_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/serde"
)

// The tests of this file reproduce issue 15's trap: card limits produced
// with librdkafka's default partitioner (CRC32, kcat's) joined with
// payments that eddy repartitions by card with Kafka's (murmur2). Both
// topics have 4 partitions, yet a card's limit and its payments land on
// different tasks for most cards.

const (
	cards      = 40
	partitions = 4
)

// produceLimitsCRC32 writes card-i's limit to "limits" where librdkafka's
// default partitioner puts it: with kcat -P -K: when useKcat, else with
// franz-go and the partition CRC32 computes.
func produceLimitsCRC32(t *testing.T, addr string, useKcat bool) {
	t.Helper()
	if useKcat {
		kcat, err := exec.LookPath("kcat")
		if err != nil {
			t.Skip("kcat is not installed: this test produces with librdkafka's default partitioner through kcat; TestMisplacedRecords* cover the same with franz-go")
		}
		var lines strings.Builder
		for i := range cards {
			fmt.Fprintf(&lines, "card-%d:%d\n", i, 100+i)
		}
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, "-P", "-b", addr, "-t", "limits", "-K:")
		cmd.Stdin = strings.NewReader(lines.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kcat -P: %v\n%s", err, out)
		}
		return
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range cards {
		key := []byte(fmt.Sprintf("card-%d", i))
		recs = append(recs, &kgo.Record{Topic: "limits", Key: key, Value: []byte(fmt.Sprint(100 + i)),
			Partition: kafka.CRC32KeyPartition(key, partitions), Timestamp: time.UnixMilli(1000)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// misplacedCards are the cards whose limit CRC32 and murmur2 put on
// different partitions: the joins that miss under murmur2.
func misplacedCards() map[string]bool {
	out := map[string]bool{}
	for i := range cards {
		key := []byte(fmt.Sprintf("card-%d", i))
		if kafka.CRC32KeyPartition(key, partitions) != kafka.KeyPartition(key, partitions) {
			out[string(key)] = true
		}
	}
	return out
}

// fraudTopology joins each payment (key: payment id, value: card),
// repartitioned by card, with the card's limit.
func fraudTopology() *eddy.Topology {
	topo := eddy.NewTopology()
	payments := eddy.Source(topo, "payments", serde.String(), serde.String())
	byCard := eddy.Repartition(eddy.Map(payments, func(pay, card string) (string, string) { return card, pay }), "by-card", serde.String(), serde.String())
	limits := eddy.TableFrom(topo, "limits", "limits", serde.String(), serde.String())
	alerts := eddy.JoinStreamTable(byCard, limits, eddy.InnerJoin, func(card, payment, limit string, _ bool) string {
		return payment + "/" + limit
	})
	eddy.To(alerts, "alerts", serde.String(), serde.String())
	return topo
}

// runFraud runs the fraud join over CRC32-placed limits with cfg's
// partitioner settings and returns the join's results, once every payment
// went through the join, the app's logs and its /metrics page.
func runFraud(t *testing.T, useKcat bool, set func(*eddy.Config)) (results []string, logs, metrics string) {
	addr := startBroker(t)
	createTopics(t, addr, partitions, "limits", "payments", "alerts")
	produceLimitsCRC32(t, addr, useKcat)
	var logBuf testutil.LogBuffer
	cfg := config(t, addr)
	cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logBuf, &testLogWriter{t: t}), &slog.HandlerOptions{Level: slog.LevelWarn}))
	set(&cfg)
	app, err := eddy.New(fraudTopology(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = app.Run(ctx)
	}()
	t.Cleanup(func() { r.stop(t) })
	// The limits first, so that each payment finds its card's limit in
	// the table when the task has it.
	waitConsumed(t, addr, cfg.AppID, "limits", cards, r)
	var pays []*kgo.Record
	for i := range cards {
		rec := srec(fmt.Sprintf("pay-%d", i), fmt.Sprintf("card-%d", i))
		rec.Timestamp = time.UnixMilli(int64(2000 + i))
		pays = append(pays, rec)
	}
	produce(t, addr, "payments", pays...)
	// Every payment went through the join: the outputs of the
	// transactions that consumed them are committed.
	waitConsumed(t, addr, cfg.AppID, eddy.RepartitionTopic(cfg.AppID, "by-card"), cards, r)
	for _, rec := range waitRecords(t, addr, "alerts", 0, r) {
		results = append(results, string(rec.Key)+"="+string(rec.Value))
	}
	slices.Sort(results)
	rec := httptest.NewRecorder()
	app.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return results, logBuf.String(), rec.Body.String()
}

// misplacedTotal sums eddy_misplaced_records_total{topic} over partitions.
func misplacedTotal(t *testing.T, metrics, topic string) int {
	t.Helper()
	total := 0
	for _, line := range strings.Split(metrics, "\n") {
		if !strings.HasPrefix(line, "eddy_misplaced_records_total{") || !strings.Contains(line, `topic="`+topic+`"`) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		total += int(v)
	}
	return total
}

func expectedAlerts(skip map[string]bool) []string {
	var out []string
	for i := range cards {
		card := fmt.Sprintf("card-%d", i)
		if !skip[card] {
			out = append(out, fmt.Sprintf("%s=pay-%d/%d", card, i, 100+i))
		}
	}
	slices.Sort(out)
	return out
}

func checkMisplacedWarning(t *testing.T, useKcat bool) {
	misplaced := misplacedCards()
	if len(misplaced) == 0 || len(misplaced) == cards {
		t.Fatalf("%d of %d cards misplaced: the test would not tell a guard from none", len(misplaced), cards)
	}
	results, logs, metrics := runFraud(t, useKcat, func(*eddy.Config) {})
	// The trap itself: the joins of the misplaced cards are missing.
	if want := expectedAlerts(misplaced); !slices.Equal(results, want) {
		t.Errorf("join results\n got %q\nwant %q", results, want)
	}
	if got := misplacedTotal(t, metrics, "limits"); got != len(misplaced) {
		t.Errorf("eddy_misplaced_records_total{topic=limits} = %d, want %d", got, len(misplaced))
	}
	if got := misplacedTotal(t, metrics, eddy.RepartitionTopic(appID(t), "by-card")); got != 0 {
		t.Errorf("eddy's own repartition topic has %d misplaced records", got)
	}
	if n := strings.Count(logs, "misplaced records"); n != 1 {
		t.Errorf("the warning is logged %d times, want once for the topic:\n%s", n, logs)
	}
	for _, want := range []string{"level=WARN", "topic=limits", "key_partition=", "looks produced with CRC32 (librdkafka's default)", "partitioner=murmur2_random", "Config.Partitioner"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the logs lack %q:\n%s", want, logs)
		}
	}
}

// TestMisplacedRecordsWarn: under the default partitioner the app warns
// about the CRC32-placed limits, with the fix, and counts them.
func TestMisplacedRecordsWarn(t *testing.T) { checkMisplacedWarning(t, false) }

// TestMisplacedRecordsWarnKcat is TestMisplacedRecordsWarn with the limits
// written by a real librdkafka producer, kcat.
func TestMisplacedRecordsWarnKcat(t *testing.T) { checkMisplacedWarning(t, true) }

func checkCRC32Exact(t *testing.T, useKcat bool) {
	results, logs, metrics := runFraud(t, useKcat, func(c *eddy.Config) { c.Partitioner = eddy.CRC32 })
	if want := expectedAlerts(nil); !slices.Equal(results, want) {
		t.Errorf("join results\n got %q\nwant %q", results, want)
	}
	if got := misplacedTotal(t, metrics, "limits"); got != 0 {
		t.Errorf("eddy_misplaced_records_total{topic=limits} = %d, want 0", got)
	}
	if strings.Contains(logs, "misplaced") {
		t.Errorf("misplaced records reported with Config.Partitioner = CRC32:\n%s", logs)
	}
}

// TestPartitionerCRC32Exact: with Config.Partitioner = CRC32, eddy
// repartitions the payments as the limits were written: every join result
// is there.
func TestPartitionerCRC32Exact(t *testing.T) { checkCRC32Exact(t, false) }

// TestPartitionerCRC32ExactKcat is TestPartitionerCRC32Exact with kcat.
func TestPartitionerCRC32ExactKcat(t *testing.T) { checkCRC32Exact(t, true) }

// TestMisplacedRecordFails: OnMisplacedRecord = FailMisplaced stops the
// app at the first misplaced record, naming it.
func TestMisplacedRecordFails(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, partitions, "limits", "payments", "alerts")
	produceLimitsCRC32(t, addr, false)
	cfg := config(t, addr)
	cfg.OnMisplacedRecord = eddy.FailMisplaced
	err := run(t, fraudTopology(), cfg).wait(t)
	t.Logf("Run: %v", err)
	if missing := errLacks(err, "eddy:", "misplaced record limits/", "@", "hashes to partition", "murmur2", "looks produced with CRC32"); len(missing) > 0 {
		t.Fatalf("Run returned %v; want an error with %q", err, missing)
	}
}

func TestPartitionerConfig(t *testing.T) {
	for s, want := range map[string]eddy.Partitioner{"murmur2": eddy.Murmur2, "murmur2_random": eddy.Murmur2, "crc32": eddy.CRC32, "consistent_random": eddy.CRC32, "consistent": eddy.CRC32} {
		if got, err := eddy.ParsePartitioner(s); err != nil || got != want {
			t.Errorf("ParsePartitioner(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := eddy.ParsePartitioner("fnv"); err == nil {
		t.Error("ParsePartitioner accepted fnv")
	}
	cfg := eddy.Config{AppID: "a", Brokers: []string{"b:9092"}, StateDir: t.TempDir(), Partitioner: 7, OnMisplacedRecord: 9}
	_, err := eddy.New(fraudTopology(), cfg)
	if missing := errLacks(err, "Partitioner 7", "eddy.CRC32", "OnMisplacedRecord 9", "eddy.FailMisplaced"); len(missing) > 0 {
		t.Errorf("New: %v; want %q", err, missing)
	}
}
