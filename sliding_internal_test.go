package eddy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/memory"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSlidingLayoutGuard: a sliding-window store that holds data without
// this eddy's layout marker (an earlier eddy's, which kept the records)
// or with another layout's marker is refused with state.ErrFormat, naming
// the layout and what to do; a new, empty store gets the marker.
func TestSlidingLayoutGuard(t *testing.T) {
	open := func(t *testing.T, seed func(*state.StoreBuffer)) *slidingWindowing[string, string, int64] {
		db, err := memory.New().Open("task")
		if err != nil {
			t.Fatal(err)
		}
		buf := state.NewBuffer(db, nil).Store("s")
		seed(buf)
		spec := NewSessionStoreSpec("s", time.Minute, serde.String(), slidingAggSerde[int64]{aggs: serde.Int64()})
		return &slidingWindowing[string, string, int64]{store: spec.View(buf)}
	}
	t.Run("new store", func(t *testing.T) {
		s := open(t, func(*state.StoreBuffer) {})
		if err := s.checkLayout(); err != nil {
			t.Fatalf("an empty store: %v", err)
		}
		s.markLayout()
		if v, ok, err := getMeta(s.store.buf, metaLayout); err != nil || !ok || v != slidingLayout {
			t.Fatalf("layout marker %d, %v, %v; want %d written", v, ok, err, slidingLayout)
		}
	})
	for name, tc := range map[string]struct {
		seed func(*state.StoreBuffer)
		want string
	}{
		"layout 1 data": {func(b *state.StoreBuffer) { b.Put([]byte("\x00\x00\x00\x00\x00\x00\x00\x01k"), []byte("v")) }, "layout 1"},
		"layout 9":      {func(b *state.StoreBuffer) { putMeta(b, metaLayout, 9) }, "layout 9"},
	} {
		t.Run(name, func(t *testing.T) {
			err := open(t, tc.seed).checkLayout()
			if !errors.Is(err, state.ErrFormat) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "reset the application") {
				t.Fatalf("checkLayout: %v; want state.ErrFormat naming %q and what to do", err, tc.want)
			}
		})
	}
}

// TestSlidingLayoutMarkerInEveryTransaction: every transaction that
// writes sliding windows logs the layout marker again, so that it stays in
// the store's changelog (compacted, and deleted by age) as long as windows
// written beside it do: a restore from that changelog finds it.
func TestSlidingLayoutMarkerInEveryTransaction(t *testing.T) {
	topo := NewTopology()
	g := GroupByKey(Source(topo, "in", serde.String(), serde.String()), serde.String())
	WindowCount(WindowedBy(g, SlidingWindowsWithTimeDifference(time.Second)), "sliding")
	rt, err := buildPlan(topo, Config{AppID: "app"})
	if err != nil {
		t.Fatal(err)
	}
	backend := memory.New()
	run, err := runtime.NewInProcess(rt, runtime.InProcessOptions{
		Open: func(id runtime.TaskID) (state.DB, error) { return backend.Open(id.String()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	buf := run.Tasks()[0].Buffer()
	marker := append([]byte{windowMetaPrefix}, metaLayout...)
	for i, at := range []int64{1000, 5000, 9000} {
		r := &kgo.Record{Topic: "in", Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(at), Offset: int64(i)}
		if err := run.Process(r); err != nil {
			t.Fatal(err)
		}
		logged := false
		for _, w := range buf.Writes(nil) {
			logged = logged || w.Store == "sliding" && string(w.Key) == string(marker)
		}
		if !logged {
			t.Fatalf("transaction %d wrote windows but not the layout marker", i)
		}
		if err := run.Commit(0); err != nil {
			t.Fatal(err)
		}
	}
}
