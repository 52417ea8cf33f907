package eddy_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

// logBuffer collects an app's logs, Info and up, for a test to read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lastCounts decodes the click counts and keeps each user's last.
func lastCounts(t *testing.T, recs []*kgo.Record) map[string]int64 {
	t.Helper()
	last := map[string]int64{}
	for _, p := range decode(t, recs, serde.String(), serde.Int64()) {
		last[p.Key] = p.Value
	}
	return last
}

// TestNamedRunRepartitionMoved: an app counts clicks per user through
// the unnamed repartition topic "<app>-rekey-1-repartition". It stops
// with records still in that topic (written here, as the previous
// topology's first part would have left them when it stopped before its
// second part consumed them). A Filter added before the re-key moves the
// repartition to "rekey-2":
//   - Run refuses to start, naming the old topic, the 3 unconsumed
//     records, the new topic and the fix;
//   - with eddy.Named(stream, "rekey-1") it starts on the old topic and
//     counts the 3 records;
//   - then unnamed again, the old topic is drained: Run starts and only
//     logs it.
func TestNamedRunRepartitionMoved(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 4, "clicks", "click-counts")
	cfg := config(t, addr)
	cfg.TableCacheBytes = eddy.NoTableCache // the waits count every update
	oldTopic := cfg.AppID + "-rekey-1-repartition"
	newTopic := cfg.AppID + "-rekey-2-repartition"
	if got := clicksTopology(false, "").Describe(cfg.AppID).RepartitionTopics; len(got) != 1 || got[0] != oldTopic {
		t.Fatalf("repartition topics %v, want [%s]", got, oldTopic)
	}

	// The previous topology: 4 clicks, 2 per user.
	app := run(t, clicksTopology(false, ""), cfg)
	produce(t, addr, "clicks", srec("s1", "ann"), srec("s2", "bob"), srec("s3", "ann"), srec("s4", "bob"))
	waitConsumed(t, addr, cfg.AppID, oldTopic, 4, app)
	if err := app.stop(t); err != nil {
		t.Fatalf("previous topology: %v", err)
	}
	// Records in flight when it stopped: re-keyed, not consumed yet.
	produce(t, addr, oldTopic, srec("ann", "ann"), srec("cid", "cid"), srec("cid", "cid"))

	// A Filter before the re-key: refused, and told why and what to do.
	logs := &logBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	err := run(t, clicksTopology(true, ""), cfg).wait(t)
	if missing := errLacks(err, "eddy: repartition topic "+oldTopic+" is not in the topology any more",
		"holds 3 records the app has not consumed", newTopic+" (the records of operator select-key-2)",
		`wrap the stream that operator select-key-2 produces in eddy.Named(stream, "rekey-1")`, "Config.AllowTopologyChange"); len(missing) > 0 {
		t.Fatalf("Run: %v\nlacks %q", err, missing)
	}

	// Named after the old topic: it starts there and counts what was in
	// flight (ann's third click, cid's two).
	app = run(t, clicksTopology(true, "rekey-1"), cfg)
	got := lastCounts(t, waitRecords(t, addr, "click-counts", 7, app))
	if want := map[string]int64{"ann": 3, "bob": 2, "cid": 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts %v, want %v", got, want)
	}
	waitConsumed(t, addr, cfg.AppID, oldTopic, 7, app)
	if err := app.stop(t); err != nil {
		t.Fatalf("named topology: %v", err)
	}
	if strings.Contains(logs.String(), "not in the topology any more") {
		t.Errorf("the app reported a lost repartition topic, but it reads %s:\n%s", oldTopic, logs)
	}

	// Unnamed again: the old topic is drained, so the app starts on
	// rekey-2 and only logs that the old one can go.
	app = run(t, clicksTopology(true, ""), cfg)
	produce(t, addr, "clicks", srec("s5", "bob"))
	got = lastCounts(t, waitRecords(t, addr, "click-counts", 8, app))
	if got["bob"] != 3 {
		t.Errorf("bob's count %d, want 3", got["bob"])
	}
	if l := logs.String(); !strings.Contains(l, "topic="+oldTopic) || !strings.Contains(l, "it can be deleted") {
		t.Errorf("the logs do not report the drained %s:\n%s", oldTopic, l)
	}
}

// TestNamedRunAllowTopologyChange: with Config.AllowTopologyChange the app
// starts although the old repartition topic holds unconsumed records, and
// warns that they are left behind.
func TestNamedRunAllowTopologyChange(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 4, "clicks", "click-counts")
	cfg := config(t, addr)
	cfg.TableCacheBytes = eddy.NoTableCache // the waits count every update
	oldTopic := cfg.AppID + "-rekey-1-repartition"
	app := run(t, clicksTopology(false, ""), cfg)
	produce(t, addr, "clicks", srec("s1", "ann"))
	waitConsumed(t, addr, cfg.AppID, oldTopic, 1, app)
	if err := app.stop(t); err != nil {
		t.Fatal(err)
	}
	produce(t, addr, oldTopic, srec("ann", "ann"), srec("bob", "bob"))

	logs := &logBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.AllowTopologyChange = true
	app = run(t, clicksTopology(true, ""), cfg)
	produce(t, addr, "clicks", srec("s2", "cid"))
	got := lastCounts(t, waitRecords(t, addr, "click-counts", 2, app))
	if want := map[string]int64{"ann": 1, "cid": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts %v, want %v (the 2 records left in %s are not read)", got, want, oldTopic)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "topic="+oldTopic) || !strings.Contains(l, "unconsumed=2") {
		t.Errorf("no warning about the 2 records left in %s:\n%s", oldTopic, l)
	}
}

// TestNamedRunDrainedOrphanOnlyLogs: the previous topology consumed all
// it wrote to its repartition topic (in transactions, so the topic ends
// with a commit marker past the group's committed offset): the changed
// topology starts, and only logs that the old topic can be deleted.
func TestNamedRunDrainedOrphanOnlyLogs(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 4, "clicks", "click-counts")
	cfg := config(t, addr)
	cfg.TableCacheBytes = eddy.NoTableCache // the waits count every update
	oldTopic := cfg.AppID + "-rekey-1-repartition"
	app := run(t, clicksTopology(false, ""), cfg)
	produce(t, addr, "clicks", srec("s1", "ann"), srec("s2", "bob"), srec("s3", "ann"))
	waitConsumed(t, addr, cfg.AppID, oldTopic, 3, app)
	if err := app.stop(t); err != nil {
		t.Fatal(err)
	}

	logs := &logBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	app = run(t, clicksTopology(true, ""), cfg)
	produce(t, addr, "clicks", srec("s4", "bob"))
	got := lastCounts(t, waitRecords(t, addr, "click-counts", 4, app))
	if want := map[string]int64{"ann": 2, "bob": 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts %v, want %v", got, want)
	}
	if l := logs.String(); !strings.Contains(l, "level=INFO") || !strings.Contains(l, "topic="+oldTopic) || !strings.Contains(l, "it can be deleted") {
		t.Errorf("the logs do not report the drained %s:\n%s", oldTopic, l)
	}
}
