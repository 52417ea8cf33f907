package eddy_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

// Sizes of TestSuppressThroughKills's input: clicks every 10 ms, each user
// every 500 ms, counted in 5 s windows.
const (
	suppressClicks = 30_000
	suppressUsers  = 50
	suppressWindow = 5_000 // ms
	suppressGrace  = 1_000 // ms
	// suppressFlushes are records far in the future, after the clicks,
	// whose keys land on both partitions: they close every click window.
	suppressFlushes = 10
)

// suppressProcessTopology counts clicks per user in tumbling windows and
// writes each window's final count, once, to "finals".
func suppressProcessTopology() *eddy.Topology {
	topo := eddy.NewTopology()
	clicks := eddy.GroupByKey(eddy.Source(topo, "clicks", serde.String(), serde.String()), serde.String())
	ws := eddy.WindowedBy(clicks, eddy.TumblingWindows(suppressWindow*time.Millisecond).WithGrace(suppressGrace*time.Millisecond))
	keys := eddy.WindowedSerde(serde.String())
	finals := eddy.Suppress(eddy.WindowCount(ws, "counts"), "finals", eddy.UntilWindowCloses(eddy.BufferConfig{}), keys, serde.Int64())
	eddy.To(eddy.ToStream(finals), "finals", keys, serde.Int64())
	return topo
}

// TestSuppressChild is the app of TestSuppressThroughKills, run in a child
// process (this test binary again) that the failpoints SIGKILL. Run alone
// it skips.
func TestSuppressChild(t *testing.T) { childApp(t, "suppress", suppressProcessTopology, 500) }

// TestSuppressThroughKills is Suppress's process test: clicks loaded
// before the app starts, the app SIGKILLed twice by failpoints (once after
// a transaction committed and before the state applied it, once before
// the commit) and restarted on the same state directory. Then "finals"
// must hold exactly one record per user and window, its count equal to
// the count of the input, and none for the flush records' windows, which
// never close.
func TestSuppressThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the app as a process three times")
	}
	addr := startBroker(t)
	createTopics(t, addr, 2, "clicks", "finals")
	var clicks []*kgo.Record
	want := map[eddy.Windowed[string]]int64{}
	for i := 0; i < suppressClicks; i++ {
		user, ts := fmt.Sprint("u", i*7%suppressUsers), int64(10*i+1)
		r := srec(user, "page")
		r.Timestamp = time.UnixMilli(ts)
		clicks = append(clicks, r)
		start := ts - ts%suppressWindow
		want[eddy.Windowed[string]{Key: user, Window: eddy.Window{Start: start, End: start + suppressWindow}}]++
	}
	for i := 0; i < suppressFlushes; i++ {
		r := srec(fmt.Sprint("flush-", i), "flush")
		r.Timestamp = time.UnixMilli(1_000_000_000)
		clicks = append(clicks, r)
	}
	produce(t, addr, "clicks", clicks...)

	// One sub-topology: a run makes at least 60 transactions of at most
	// CommitRecords, so the first run reaches its 25th and the next, with
	// more than 35 left, its 10th.
	runKilledThenLive(t, "TestSuppressChild", []string{"commit.after-end@25", "commit.before-end@10"}, addr)

	recs := waitRecords(t, addr, "finals", len(want), nil)
	checkFinals(t, recs, want)
}

// checkFinals checks that recs, windowed counts, hold exactly one record
// per window of want, with want's count, and none for another window.
func checkFinals(t *testing.T, recs []*kgo.Record, want map[eddy.Windowed[string]]int64) {
	t.Helper()
	t.Logf("%d finals", len(recs))
	if len(recs) != len(want) {
		t.Errorf("%d finals, want %d: one per key and window", len(recs), len(want))
	}
	got := map[eddy.Windowed[string]][]int64{}
	for _, kv := range decode(t, recs, eddy.WindowedSerde(serde.String()), serde.Int64()) {
		got[kv.Key] = append(got[kv.Key], kv.Value)
	}
	wrong := 0
	for w, n := range want {
		if g := got[w]; len(g) != 1 || g[0] != n {
			if wrong++; wrong <= 10 {
				t.Errorf("finals of %v: %v, want exactly [%d]", w, g, n)
			}
		}
	}
	for w, g := range got {
		if _, ok := want[w]; !ok {
			t.Errorf("finals of %v: %v, want none (not a closed window of the input)", w, g)
		}
	}
	if wrong > 10 {
		t.Errorf("%d windows wrong in all", wrong)
	}
}

// TestSuppressRestart: updates held when the app stops are in the
// buffer's store when it starts again, and are forwarded once, when the
// restarted app's stream time reaches them.
func TestSuppressRestart(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	createTopics(t, addr, 1, "clicks", "held")
	build := func() *eddy.Topology {
		topo := eddy.NewTopology()
		counts := eddy.Count(eddy.GroupByKey(eddy.Source(topo, "clicks", serde.String(), serde.String()), serde.String()), "counts")
		held := eddy.Suppress(counts, "held", eddy.UntilTimeLimit(10*time.Second, eddy.BufferConfig{}), serde.String(), serde.Int64())
		eddy.To(eddy.ToStream(held), "held", serde.String(), serde.Int64())
		return topo
	}
	at := func(key string, ms int64) *kgo.Record {
		r := srec(key, "page")
		r.Timestamp = time.UnixMilli(ms)
		return r
	}
	cfg := config(t, addr)
	app := run(t, build(), cfg)
	first := produce(t, addr, "clicks", at("a", 0), at("a", 1000), at("b", 2000), at("c", 9000))
	waitConsumed(t, addr, cfg.AppID, "clicks", len(first), app)
	if err := app.stop(t); err != nil {
		t.Fatalf("first run: %v", err)
	}
	if recs := waitRecords(t, addr, "held", 0, nil); len(recs) != 0 {
		t.Fatalf("the first run forwarded %d records, want none: nothing was due", len(recs))
	}

	app = run(t, build(), cfg)
	produce(t, addr, "clicks", at("a", 12000), at("x", 19000))
	got := decode(t, waitRecords(t, addr, "held", 3, app), serde.String(), serde.Int64())
	want := []kv[string, int64]{{"a", 3}, {"b", 1}, {"c", 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("forwarded after the restart: %v, want %v (held a=2 and b=1 collapsed with a's update at 12 s, then c)", got, want)
	}
	if err := app.stop(t); err != nil {
		t.Fatalf("second run: %v", err)
	}
}

// TestSuppressBoundThroughRestart: the buffer's record count survives a
// restart, and ShutDownWhenFull stops the app: three keys held by the
// first run fill a buffer of three, so the restarted app's fourth key
// stops it with ErrSuppressBufferFull, having forwarded nothing.
func TestSuppressBoundThroughRestart(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	createTopics(t, addr, 1, "clicks", "held")
	build := func() *eddy.Topology {
		topo := eddy.NewTopology()
		counts := eddy.Count(eddy.GroupByKey(eddy.Source(topo, "clicks", serde.String(), serde.String()), serde.String()), "counts")
		held := eddy.Suppress(counts, "held", eddy.UntilTimeLimit(time.Hour, eddy.BufferConfig{MaxRecords: 3}), serde.String(), serde.Int64())
		eddy.To(eddy.ToStream(held), "held", serde.String(), serde.Int64())
		return topo
	}
	cfg := config(t, addr)
	app := run(t, build(), cfg)
	first := produce(t, addr, "clicks", srec("a", "page"), srec("b", "page"), srec("c", "page"), srec("a", "page"))
	waitConsumed(t, addr, cfg.AppID, "clicks", len(first), app)
	if err := app.stop(t); err != nil {
		t.Fatalf("first run: %v", err)
	}

	app = run(t, build(), cfg)
	produce(t, addr, "clicks", srec("d", "page"))
	err := app.wait(t)
	if !errors.Is(err, eddy.ErrSuppressBufferFull) || !strings.Contains(err.Error(), "suppress store held") {
		t.Errorf("second run ended with %v, want ErrSuppressBufferFull naming the store held", err)
	}
	if recs := waitRecords(t, addr, "held", 0, nil); len(recs) != 0 {
		t.Errorf("%d records forwarded, want none", len(recs))
	}
}
