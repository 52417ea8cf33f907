package eddy_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/serde"
)

// TestRunSourcePatternNewTopic: an app counts the records of every topic
// matching "clicks-.*". A matching topic created while it runs is picked
// up (the instance commits and starts again with it) and read from its
// start; the counts, which include the earlier topics' records, are exact
// across the change: nothing lost, nothing counted twice.
func TestRunSourcePatternNewTopic(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 3, "clicks-a", "clicks-b", "other", "counts")
	topo := eddy.NewTopology()
	clicks := eddy.SourcePattern(topo, regexp.MustCompile(`clicks-.*`), serde.String(), serde.String())
	counts := eddy.Count(eddy.GroupByKey(clicks, serde.String()), "counts")
	eddy.To(eddy.ToStream(counts), "counts", serde.String(), serde.Int64())

	want := map[string]int64{}
	write := func(topic string, n int) {
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			k := fmt.Sprint("k", i%10)
			recs = append(recs, srec(k, topic))
			if !strings.HasPrefix(topic, "other") {
				want[k]++
			}
		}
		produce(t, addr, topic, recs...)
	}
	write("clicks-a", 30)
	write("clicks-b", 20)
	write("other", 40) // does not match: never counted
	app := run(t, topo, config(t, addr))
	waitCounts(t, addr, want, app)

	createTopics(t, addr, 3, "clicks-c")
	write("clicks-c", 40)
	write("clicks-a", 10)
	waitCounts(t, addr, want, app)
	if err := app.stop(t); err != nil {
		t.Fatal(err)
	}
}

// waitCounts waits until the last count of each key in "counts" is
// want's, and fails if one goes past it (a record counted twice).
func waitCounts(t *testing.T, addr string, want map[string]int64, app *running) {
	t.Helper()
	got := map[string]int64{}
	for deadline := time.Now().Add(hangGuard); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		recs, err := verify.ReadAll(ctx, []string{addr}, "counts")
		cancel()
		if err == nil {
			got = map[string]int64{}
			for _, p := range decode(t, recs, serde.String(), serde.Int64()) {
				got[p.Key] = p.Value // in offset order within a key's partition
			}
			for k, n := range got {
				if n > want[k] {
					t.Fatalf("key %s counted %d times, %d records written", k, n, want[k])
				}
			}
			if maps.Equal(got, want) {
				return
			}
		}
		if done, err := app.exited(); done {
			t.Fatalf("eddy.Run returned (err: %v) with counts %v, want %v", err, got, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("counts %v after %v, want %v", got, hangGuard, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
