package eddy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/httpapi"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/memory"
)

// TestSlicedLayoutGuard: a store of whole windows is never read as slices,
// nor slices as windows, nor slices of another length: the aggregation
// fails with state.ErrFormat, naming the store and what to do. A new
// store, or one with only the emitted mark (its windows expired), is
// fine, and a sliced one gets the marker.
func TestSlicedLayoutGuard(t *testing.T) {
	const s = time.Second
	hop := HoppingWindows(10*s, 2*s)
	window := func(b *state.StoreBuffer) { b.Put([]byte("\x00\x00\x00\x00\x00\x00\x00\x01k"), []byte{0}) }
	buffer := func(t *testing.T, seed func(*state.StoreBuffer)) *WindowStore[string, int64] {
		db, err := memory.New().Open("task")
		if err != nil {
			t.Fatal(err)
		}
		buf := state.NewBuffer(db, nil).Store("counts")
		seed(buf)
		return NewWindowStoreSpec("counts", time.Minute, serde.String(), serde.Int64()).View(buf)
	}
	sliced := func(t *testing.T, w TimeWindows, seed func(*state.StoreBuffer)) error {
		return newSlicedWindowing[string, string, int64](w.Sliced(), fold[string, string, int64]{}, buffer(t, seed)).checkLayout()
	}
	windows := func(t *testing.T, seed func(*state.StoreBuffer)) error {
		return (&timeWindowing[string, string, int64]{win: hop, store: buffer(t, seed)}).checkNotSliced()
	}
	t.Run("new store", func(t *testing.T) {
		w := newSlicedWindowing[string, string, int64](hop.Sliced(), fold[string, string, int64]{}, buffer(t, func(*state.StoreBuffer) {}))
		if err := w.checkLayout(); err != nil {
			t.Fatalf("an empty store: %v", err)
		}
		w.markLayout()
		if v, ok, err := getMeta(w.store.buf, metaSlice); err != nil || !ok || v != 2000 {
			t.Fatalf("slice marker %d, %v, %v; want 2000 written", v, ok, err)
		}
	})
	for name, err := range map[string]error{
		"sliced, only the emitted mark": sliced(t, hop, func(b *state.StoreBuffer) { putMeta(b, metaEmitted, 4000) }),
		"sliced, same slices":           sliced(t, hop, func(b *state.StoreBuffer) { putMeta(b, metaSlice, 2000); window(b) }),
		"windows, a store of windows":   windows(t, window),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"windows read as slices":   {sliced(t, hop, window), "written without Sliced"},
		"slices read as windows":   {windows(t, func(b *state.StoreBuffer) { putMeta(b, metaSlice, 2000) }), "add Sliced back"},
		"slices of another length": {sliced(t, HoppingWindows(10*s, 5*s), func(b *state.StoreBuffer) { putMeta(b, metaSlice, 2000) }), "slice by 5000ms"},
	} {
		if !errors.Is(tc.err, state.ErrFormat) || !strings.Contains(tc.err.Error(), tc.want) || !strings.Contains(tc.err.Error(), "store counts") || !strings.Contains(tc.err.Error(), "reset the application") {
			t.Errorf("%s: %v; want state.ErrFormat naming store counts, %q and what to do", name, tc.err, tc.want)
		}
	}
}

// TestSlicedStoreQueriesRefused: interactive queries of a sliced store
// (QueryWindows, the HTTP windows route) are refused, naming the store and
// what to do, rather than answering a slice for a window; a store of whole
// windows is not (here it meets the app not running).
func TestSlicedStoreQueriesRefused(t *testing.T) {
	topo := NewTopology()
	g := GroupByKey(Source(topo, "in", serde.String(), serde.String()), serde.String())
	hop := HoppingWindows(10*time.Second, 2*time.Second)
	WindowCount(WindowedBy(g, hop.Sliced()).Emit(EmitFinal), "sliced")
	WindowCount(WindowedBy(g, hop).Emit(EmitFinal), "whole")
	if err := topo.Err(); err != nil {
		t.Fatal(err)
	}
	app := &App{stores: topo.stores}
	for store, sliced := range map[string]bool{"sliced": true, "whole": false} {
		_, err := httpQueries{app}.Windows(context.Background(), store, "a", 0, 100, false)
		refused := err != nil && strings.Contains(err.Error(), "store "+store+" keeps slices of hopping windows") && strings.Contains(err.Error(), "materialize")
		if refused != sliced || sliced && !errors.Is(err, httpapi.ErrBadRequest) {
			t.Errorf("HTTP windows of store %s: %v; refused %v, want %v (as a bad request)", store, err, refused, sliced)
		}
		spec := NewWindowStoreSpec(store, time.Minute, serde.String(), serde.Int64())
		for _, err := range QueryWindows(app, spec).Fetch("a", 0, 100) {
			refused := err != nil && strings.HasPrefix(err.Error(), "eddy: store "+store+" keeps slices")
			if refused != sliced {
				t.Errorf("QueryWindows of store %s: %v; refused %v, want %v", store, err, refused, sliced)
			}
		}
	}
}
