package runtime

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/testutil"
)

// rekeying is a two-sub-topology topology: sub-topology 0 re-keys the
// records of input by value modulo 3 into repartition topic
// "<app>-rekey-repartition", sub-topology 1 counts per new key (the
// counting task, writing "<count>:<value>" to "out").
func rekeying(appID, input string) Topology {
	rp := appID + "-rekey-repartition"
	count := counting().Subtopologies[0]
	count.Sources = []string{rp}
	return Topology{
		Subtopologies: []Subtopology{
			{Sources: []string{input}, NewTask: func(tc TaskContext) (TaskProcessor, error) {
				return &rekeyTask{tc: tc, topic: rp}, nil
			}},
			count,
		},
		Repartitions: []Repartition{{Topic: rp}},
	}
}

type rekeyTask struct {
	tc    TaskContext
	topic string
}

func (r *rekeyTask) Process(rec *kgo.Record) error {
	n, err := strconv.Atoi(string(rec.Value))
	if err != nil {
		return err
	}
	return r.tc.Produce(r.topic, rekey(n), rec.Value, rec.Timestamp.UnixMilli(), nil)
}

func rekey(n int) []byte                       { return []byte(fmt.Sprintf("g%d", n%3)) }
func (r *rekeyTask) Punctuate(time.Time) error { return nil }
func (r *rekeyTask) Close() error              { return nil }

// rekeyInput produces values from..from+n-1 to topic and records their new
// keys in keyOf.
func (h *harness) rekeyInput(topic string, from, n int, keyOf map[string]string) {
	h.t.Helper()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		v := strconv.Itoa(i)
		keyOf[v] = string(rekey(i))
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i%5)), Value: []byte(v)})
	}
	h.produceRecords(recs...)
}

// TestRepartitionThroughRestarts runs the re-keying topology, stops it
// (cleanly, and once right after records were produced, before they could
// all be processed) and restarts it: each record passes both
// sub-topologies exactly once. The repartition topic takes the input's
// partition count (3, not the broker's default of 2).
func TestRepartitionThroughRestarts(t *testing.T) {
	h := newHarness(t)
	h.createTopics(kafka.TopicSpec{Name: "in3", Partitions: 3})
	var log testutil.LogBuffer
	cfg := h.config(t.TempDir(), &log)
	topo := rekeying(cfg.AppID, "in3")
	keyOf := map[string]string{}

	stop := h.runTopo(cfg, topo)
	h.rekeyInput("in3", 0, 100, keyOf)
	h.waitOutputs(100)
	stop()
	h.checkPartitions(cfg.AppID+"-rekey-repartition", 3)

	stop = h.runTopo(cfg, topo)
	h.rekeyInput("in3", 100, 100, keyOf)
	stop() // mid-stream: some of the 100 are in flight between the sub-topologies

	stop = h.runTopo(cfg, topo)
	h.rekeyInput("in3", 200, 100, keyOf)
	outs := h.waitOutputs(300)
	stop()
	checkPermuted(t, outs, keyOf)
	if !strings.Contains(log.String(), "task=1_2") {
		t.Fatalf("no task of the repartition topic's third partition ran:\n%s", log.String())
	}
}

// TestRepartitionCancelledMidStream cancels the runtime three times while
// it works through a batch of records, once the first of them came out:
// records are in flight in both sub-topologies and in the repartition
// topic when it stops (small transactions make a batch take many). The
// outputs must still be exact.
func TestRepartitionCancelledMidStream(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir(), io.Discard)
	cfg.CommitRecords = 7
	topo := rekeying(cfg.AppID, "in")
	keyOf := map[string]string{}
	n := 0
	for round := 0; round < 3; round++ {
		stop := h.runTopo(cfg, topo)
		h.rekeyInput("in", n, 300, keyOf)
		n += 300
		h.waitOutputs(n - 290) // it is running: some of the batch came out
		stop()
		outs, err := verify.ReadAll(context.Background(), h.seeds, "out")
		if err != nil {
			t.Fatal(err)
		}
		rekeyed, err := verify.ReadAll(context.Background(), h.seeds, cfg.AppID+"-rekey-repartition")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: stopped with %d of %d records re-keyed, %d through both sub-topologies", round, len(rekeyed), n, len(outs))
	}
	stop := h.runTopo(cfg, topo)
	outs := h.waitOutputs(n)
	stop()
	checkPermuted(t, outs, keyOf)
}

// checkPartitions fails unless topic has n partitions.
func (h *harness) checkPartitions(topic string, n int32) {
	h.t.Helper()
	cl := h.client()
	defer cl.Close()
	parts, err := kafka.Partitions(context.Background(), cl, topic)
	if err != nil {
		h.t.Fatal(err)
	}
	if parts[topic] != n {
		h.t.Fatalf("%s has %d partitions, want %d", topic, parts[topic], n)
	}
}

// TestPrepareTopicsChecksCoPartitioning: every problem is reported, with
// the topics and the fix.
func TestPrepareTopicsChecksCoPartitioning(t *testing.T) {
	h := newHarness(t)
	h.createTopics(kafka.TopicSpec{Name: "in3", Partitions: 3}, kafka.TopicSpec{Name: "app-wrong-repartition", Partitions: 5})
	noop := func(TaskContext) (TaskProcessor, error) { return nil, nil }
	cfg := h.config(t.TempDir(), io.Discard)
	for name, tc := range map[string]struct {
		topo Topology
		want []string
	}{
		"sources": {Topology{Subtopologies: []Subtopology{{Sources: []string{"in", "in3"}, NewTask: noop}}},
			[]string{"reads in (2 partitions) and in3 (3 partitions)", "give them the same partition count"}},
		"missing": {Topology{Subtopologies: []Subtopology{{Sources: []string{"in", "nope"}, NewTask: noop}}},
			[]string{"nope", "create them before starting"}},
		"repartition": {Topology{
			Subtopologies: []Subtopology{{Sources: []string{"in3"}, NewTask: noop}, {Sources: []string{"app-wrong-repartition"}, NewTask: noop}},
			Repartitions:  []Repartition{{Topic: "app-wrong-repartition"}},
		}, []string{"app-wrong-repartition has 5 partitions, the topology wants 3", "delete it"}},
		"repartition count": {Topology{
			Subtopologies: []Subtopology{{Sources: []string{"in"}, NewTask: noop}, {Sources: []string{"in3", "app-y-repartition"}, NewTask: noop}},
			Repartitions:  []Repartition{{Topic: "app-y-repartition", Partitions: 4}},
		}, []string{"reads in3 (3 partitions) and app-y-repartition (4 partitions)"}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := Run(ctx, cfg, tc.topo)
			if err == nil {
				t.Fatal("Run accepted the topology")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestChangelogRetention: a store with a retention gets a changelog that
// is compacted and deleted after the retention plus a day; a store without
// one, a compacted changelog. Changelog records carry the wall clock, or a
// delete policy would expire them by whatever the client made of a zero.
func TestChangelogRetention(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir(), io.Discard)
	topo := counting()
	topo.Subtopologies[0].Stores = append(topo.Subtopologies[0].Stores, Store{Name: "windows", Retention: time.Hour})
	before := time.Now().Add(-time.Millisecond) // ms timestamps round down
	stop := h.runTopo(cfg, topo)
	// Inputs from long ago move the stream time there: the changelog
	// must not take the records' event time either.
	var recs []*kgo.Record
	for i := 0; i < 20; i++ {
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(fmt.Sprintf("k%d", i%5)), Value: []byte(strconv.Itoa(i)),
			Timestamp: time.Date(2001, 1, 1, 0, 0, i, 0, time.UTC)})
	}
	h.produceRecords(recs...)
	h.waitOutputs(20)
	stop()
	after := time.Now()

	cl := h.client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	windows, counts := ChangelogTopic(cfg.AppID, "windows"), ChangelogTopic(cfg.AppID, "counts")
	configs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, windows, counts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		windows: {"cleanup.policy": "compact,delete", "retention.ms": strconv.FormatInt((25 * time.Hour).Milliseconds(), 10)},
		counts:  {"cleanup.policy": "compact"},
	}
	for _, rc := range configs {
		if rc.Err != nil {
			t.Fatalf("%s: %v", rc.Name, rc.Err)
		}
		for key, value := range want[rc.Name] {
			got := ""
			for _, c := range rc.Configs {
				if c.Key == key && c.Value != nil {
					got = *c.Value
				}
			}
			if got != value {
				t.Errorf("%s: %s=%q, want %q", rc.Name, key, got, value)
			}
		}
	}

	recs, err = verify.ReadAll(ctx, h.seeds, counts)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatal("the counts changelog is empty")
	}
	for _, r := range recs {
		if r.Timestamp.Before(before) || r.Timestamp.After(after) {
			t.Fatalf("changelog record %s/%d@%d has timestamp %v, not the wall clock of the run [%v, %v]",
				r.Topic, r.Partition, r.Offset, r.Timestamp, before, after)
		}
	}
}

// TestRunGlobalStoreNeedsItsTopic: a global table's topic is not created
// by the app; a missing one is named in the error.
func TestRunGlobalStoreNeedsItsTopic(t *testing.T) {
	h := newHarness(t)
	topo := counting()
	topo.Globals = []GlobalStore{{Name: "rates", Topic: "rates"}}
	err := Run(context.Background(), h.config(t.TempDir(), io.Discard), topo)
	if err == nil || !strings.Contains(err.Error(), "unknown topic: rates") {
		t.Fatalf("got %v, want an error naming the missing topic", err)
	}
}
