package eddy

import (
	"errors"
	"strings"
	"testing"
	"time"

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
