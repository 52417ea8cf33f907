package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/state"
)

// observing wraps the first sub-topology's NewTask to report each task's
// stream time when it opens.
func observing(topo Topology, seen func(TaskID, int64)) Topology {
	next := topo.Subtopologies[0].NewTask
	topo.Subtopologies[0].NewTask = func(tc TaskContext) (TaskProcessor, error) {
		seen(tc.ID(), tc.StreamTime())
		return next(tc)
	}
	return topo
}

// TestRestoreRecoversStreamTime restarts the tasks, then deletes the state
// directory and restarts them again: both times they resume with the
// stream time of their last committed transaction, kept in the database
// and carried by the offsets records of the changelog.
func TestRestoreRecoversStreamTime(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	var log testutil.LogBuffer
	cfg := h.config(dir, &log)
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var recs []*kgo.Record
	for i := 0; i < 60; i++ {
		// Timestamps go up and down: stream time is the largest seen.
		ts := base.Add(time.Duration((i*37)%60) * time.Second)
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(fmt.Sprintf("k%d", i%5)), Value: []byte(fmt.Sprint(i)), Timestamp: ts})
	}
	want := map[TaskID]int64{}
	for _, r := range h.produceRecords(recs...) {
		id := TaskID{Partition: r.Partition}
		want[id] = max(want[id], r.Timestamp.UnixMilli())
	}
	if len(want) != 2 {
		t.Fatalf("the records went to %d partitions, want both", len(want))
	}

	stop := h.run(cfg)
	h.waitOutputs(len(recs))
	stop()

	// observe runs the topology until its two tasks opened and returns
	// the stream time each opened with.
	observe := func() map[TaskID]int64 {
		var mu sync.Mutex
		got := map[TaskID]int64{}
		opened := make(chan struct{}, 2)
		stop := h.runTopo(cfg, observing(counting(), func(id TaskID, st int64) {
			mu.Lock()
			got[id] = st
			mu.Unlock()
			opened <- struct{}{}
		}))
		<-opened
		<-opened
		stop()
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	for _, from := range []string{"the local state", "the changelog"} {
		if from == "the changelog" {
			if err := os.RemoveAll(filepath.Join(dir, cfg.AppID)); err != nil {
				t.Fatal(err)
			}
		}
		got := observe()
		for id, ts := range want {
			if got[id] != ts {
				t.Errorf("from %s, task %s opened with stream time %s, want %s", from, id, fmtStreamTime(got[id]), fmtStreamTime(ts))
			}
		}
	}
	if !strings.Contains(log.String(), `msg="restored state"`) {
		t.Fatalf("no restore was logged:\n%s", log.String())
	}
}

func fmtStreamTime(ts int64) string {
	if ts == state.NoStreamTime {
		return "none"
	}
	return time.UnixMilli(ts).UTC().Format(time.RFC3339)
}
