package runtime

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/state"
)

// TestRepartitionPurge: offer takes the committed offsets of repartition
// partitions only (not of external sources), at most once per interval per
// worker; purge deletes the records below them, once.
func TestRepartitionPurge(t *testing.T) {
	h := newHarness(t)
	h.createTopics(kafka.TopicSpec{Name: "app-r-repartition", Partitions: 2})
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, &kgo.Record{Topic: "app-r-repartition", Partition: int32(i % 2), Value: []byte("v")})
	}
	pcl := h.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer pcl.Close()
	if err := pcl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	cfg := h.config(t.TempDir(), io.Discard)
	cfg.RepartitionPurgeInterval = time.Hour // one offer per worker in this test
	p := newRepartitionPurge(cfg, []Repartition{{Topic: "app-r-repartition"}})
	taskOf := func(part int32, repartitionAt, inputAt int64) *task {
		r := state.TopicPartition{Topic: "app-r-repartition", Partition: part}
		in := state.TopicPartition{Topic: "in", Partition: part}
		tk := &task{}
		tk.sources = []state.TopicPartition{r, in}
		tk.committed.Input = map[state.TopicPartition]int64{r: repartitionAt, in: inputAt}
		return tk
	}
	p.offer("w0", map[TaskID]*task{{1, 0}: taskOf(0, 3, 7)})
	p.offer("w1", map[TaskID]*task{{1, 1}: taskOf(1, 4, 9)})
	p.offer("w0", map[TaskID]*task{{1, 0}: taskOf(0, 5, 8)}) // within the interval: ignored
	want := map[string]map[int32]int64{"app-r-repartition": {0: 3, 1: 4}}
	if fmt.Sprint(p.pending) != fmt.Sprint(want) {
		t.Fatalf("pending %v, want %v", p.pending, want)
	}

	cl := h.client()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.purge(ctx, adm)
	starts, err := adm.ListStartOffsets(ctx, "app-r-repartition")
	if err != nil {
		t.Fatal(err)
	}
	for part, at := range map[int32]int64{0: 3, 1: 4} {
		if o, ok := starts.Lookup("app-r-repartition", part); !ok || o.Offset != at {
			t.Errorf("partition %d starts at %v (%v), want %d", part, o.Offset, ok, at)
		}
	}
	if fmt.Sprint(p.deleted) != fmt.Sprint(want) {
		t.Errorf("deleted %v, want %v", p.deleted, want)
	}
}
