package eddy_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
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

// Count the orders of every region's topic ("orders-eu", "orders-us", and
// those created later), per customer: the topics must have the same
// partition count, as a task reads partition p of each.
func ExampleSourcePattern() {
	t := eddy.NewTopology()
	orders := eddy.SourcePattern(t, regexp.MustCompile(`orders-[a-z]+`), serde.String(), serde.String())
	counts := eddy.Count(eddy.GroupByKey(orders, serde.String()), "orders-per-customer")
	eddy.To(eddy.ToStream(counts), "orders-per-customer", serde.String(), serde.Int64())

	d, err := eddytest.New(t, eddytest.Options{})
	if err != nil {
		panic(err)
	}
	defer d.Close()
	eddytest.Input(d, "orders-eu", serde.String(), serde.String()).Pipe("ann", "book", 1_000)
	eddytest.Input(d, "orders-us", serde.String(), serde.String()).Pipe("ann", "pen", 2_000)
	eddytest.Input(d, "orders-us", serde.String(), serde.String()).Pipe("bob", "ink", 3_000)
	recs, _ := eddytest.Output(d, "orders-per-customer", serde.String(), serde.Int64()).ReadAll()
	for _, r := range recs {
		fmt.Printf("%s: %d\n", r.Key, r.Value)
	}
	// Output:
	// ann: 1
	// ann: 2
	// bob: 1
}

// TestSourcePatternDescribe: the pattern's node is a source that names the
// pattern as given, listed among its sub-topology's patterns.
func TestSourcePatternDescribe(t *testing.T) {
	topo := eddy.NewTopology()
	eddy.To(eddy.SourcePattern(topo, regexp.MustCompile(`clicks-.*`), serde.String(), serde.String()), "out", serde.String(), serde.String())
	d := topo.Describe("app")
	if len(d.Subtopologies) != 1 {
		t.Fatalf("%d sub-topologies, want 1", len(d.Subtopologies))
	}
	sub := d.Subtopologies[0]
	if got := sub.Nodes[0]; got.Kind != eddy.NodeSource || got.Pattern != "clicks-.*" || got.Topic != "" {
		t.Errorf("first node %+v, want a source with pattern clicks-.*", got)
	}
	if len(sub.Patterns) != 1 || sub.Patterns[0] != "clicks-.*" || len(sub.Sources) != 0 {
		t.Errorf("patterns %q, sources %q; want [clicks-.*] and none", sub.Patterns, sub.Sources)
	}
}

// TestRunSourcePatternNotCopartitioned: matching topics with different
// partition counts stop the app at start with an error naming both.
func TestRunSourcePatternNotCopartitioned(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 3, "clicks-a", "out")
	createTopics(t, addr, 2, "clicks-b")
	topo := eddy.NewTopology()
	eddy.To(eddy.SourcePattern(topo, regexp.MustCompile(`clicks-.*`), serde.String(), serde.String()), "out", serde.String(), serde.String())
	err := run(t, topo, config(t, addr)).wait(t)
	if err == nil {
		t.Fatal("Run started with matching topics of 3 and 2 partitions")
	}
	if missing := errLacks(err, "clicks-a (3 partitions)", "clicks-b (2 partitions)", "co-partitioned"); len(missing) > 0 {
		t.Errorf("error %q lacks %q", err, missing)
	}
}

// TestRunSourcePatternDeadLetter: a record of a matched topic that fails
// to decode goes to that topic's dead-letter topic, which Run creates once
// the pattern resolved (and which the pattern does not match in turn).
func TestRunSourcePatternDeadLetter(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 2, "clicks-a", "counts")
	topo := eddy.NewTopology()
	clicks := eddy.SourcePattern(topo, regexp.MustCompile(`clicks-.*`), serde.String(), serde.Int64())
	eddy.To(eddy.ToStream(eddy.Count(eddy.GroupByKey(clicks, serde.String()), "counts")), "counts", serde.String(), serde.Int64())
	produce(t, addr, "clicks-a", srec("k1", "bad"), rec([]byte("k1"), i64(1)))
	cfg := config(t, addr)
	cfg.OnDecodeError = eddy.DeadLetter
	app := run(t, topo, cfg)
	waitCounts(t, addr, map[string]int64{"k1": 1}, app)
	dl := waitRecords(t, addr, "clicks-a.dlq", 1, app)
	if len(dl) != 1 || string(dl[0].Value) != "bad" {
		t.Errorf("dead letters %v, want the record with value bad", dl)
	}
}

// TestRunSourcePatternTopicDeleted: a matched topic deleted while the app
// runs leaves the plan; the other topics' counts go on exactly.
func TestRunSourcePatternTopicDeleted(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 2, "clicks-a", "clicks-b", "counts")
	topo := eddy.NewTopology()
	clicks := eddy.SourcePattern(topo, regexp.MustCompile(`clicks-.*`), serde.String(), serde.String())
	eddy.To(eddy.ToStream(eddy.Count(eddy.GroupByKey(clicks, serde.String()), "counts")), "counts", serde.String(), serde.Int64())
	produce(t, addr, "clicks-a", srec("k", "a"), srec("k", "a"))
	produce(t, addr, "clicks-b", srec("k", "b"))
	logs := &logLines{}
	cfg := config(t, addr)
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	app := run(t, topo, cfg)
	waitCounts(t, addr, map[string]int64{"k": 3}, app)
	cl := client(t, addr)
	defer cl.Close()
	if _, err := kadm.NewClient(cl).DeleteTopics(t.Context(), "clicks-b"); err != nil {
		t.Fatal(err)
	}
	// The records written once the new plan runs reach it too.
	logs.wait(t, `msg="source patterns resolved"`, "[clicks-a]", app)
	produce(t, addr, "clicks-a", srec("k", "a"))
	waitCounts(t, addr, map[string]int64{"k": 4}, app)
	if err := app.stop(t); err != nil {
		t.Fatal(err)
	}
}

// logLines keeps an app's log lines, for a test that waits for an event
// only the log shows.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

// wait waits for a line that holds both parts.
func (l *logLines) wait(t *testing.T, part1, part2 string, app *running) {
	t.Helper()
	for deadline := time.Now().Add(hangGuard); ; {
		l.mu.Lock()
		found := slices.ContainsFunc(l.lines, func(line string) bool {
			return strings.Contains(line, part1) && strings.Contains(line, part2)
		})
		l.mu.Unlock()
		if found {
			return
		}
		if done, err := app.exited(); done {
			t.Fatalf("eddy.Run returned (err: %v) before logging %s %s", err, part1, part2)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %s and %s after %v", part1, part2, hangGuard)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSourcePatternThatCannotBeAnchored: a pattern ending in an
// unterminated \Q compiles alone but not inside the anchoring group; the
// topology reports it instead of panicking.
func TestSourcePatternThatCannotBeAnchored(t *testing.T) {
	topo := eddy.NewTopology()
	eddy.SourcePattern(topo, regexp.MustCompile(`\Qorders.`), serde.String(), serde.String())
	err := topo.Err()
	if err == nil || !strings.Contains(err.Error(), `eddy: SourcePattern "\\Qorders."`) || !strings.Contains(err.Error(), `\E`) {
		t.Fatalf("error %v, want one naming the pattern and the fix", err)
	}
}

// TestRunSourcePatternTwoInstances: two instances of an app share the
// topics that match its pattern, those created while they run included:
// the group spreads the new topic's partitions over both, and the counts
// are exact across the change (nothing lost, nothing counted twice
// whichever instance a partition moved to).
func TestRunSourcePatternTwoInstances(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 4, "clicks-a", "counts")
	topology := func() *eddy.Topology {
		topo := eddy.NewTopology()
		clicks := eddy.SourcePattern(topo, regexp.MustCompile(`clicks-.*`), serde.String(), serde.String())
		eddy.To(eddy.ToStream(eddy.Count(eddy.GroupByKey(clicks, serde.String()), "counts")), "counts", serde.String(), serde.Int64())
		return topo
	}
	want := map[string]int64{}
	write := func(topic string, n int) {
		var recs []*kgo.Record
		for i := range n {
			k := fmt.Sprint("k", i%16)
			recs = append(recs, srec(k, topic))
			want[k]++
		}
		produce(t, addr, topic, recs...)
	}
	write("clicks-a", 64)
	cfg := config(t, addr)
	first := run(t, topology(), cfg)
	cfg.StateDir = t.TempDir()
	second := run(t, topology(), cfg)
	waitCounts(t, addr, want, first)

	createTopics(t, addr, 4, "clicks-b")
	write("clicks-b", 64)
	write("clicks-a", 32)
	waitCounts(t, addr, want, second)

	// Both members own partitions of the new topic.
	cl := client(t, addr)
	defer cl.Close()
	for deadline := time.Now().Add(hangGuard); ; {
		owners := map[string]int{}
		groups, err := kadm.NewClient(cl).DescribeGroups(t.Context(), cfg.AppID)
		if err == nil {
			for _, m := range groups[cfg.AppID].Members {
				if assigned, ok := m.Assigned.AsConsumer(); ok {
					for _, tp := range assigned.Topics {
						if tp.Topic == "clicks-b" && len(tp.Partitions) > 0 {
							owners[m.MemberID] += len(tp.Partitions)
						}
					}
				}
			}
		}
		if len(owners) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("clicks-b's partitions by member: %v (err %v), want both members to own some", owners, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, app := range []*running{first, second} {
		if err := app.stop(t); err != nil {
			t.Fatal(err)
		}
	}
}
