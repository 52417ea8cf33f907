package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/statetest"
)

// TestSharedReads: SharedGet and SharedScan run on other goroutines while
// the owner applies batches and reads (the race detector checks the
// scratch buffers), and each sees a consistent state: every batch writes
// the same counter to every key, so a scan sees one value throughout and
// a value never goes back.
func TestSharedReads(t *testing.T) {
	b := newBackend(t, Options{})
	d := statetest.Open(t, b, filepath.Join(t.TempDir(), "task"))
	r := d.(state.SharedReader)
	const keys = 20
	key := func(i int) []byte { return []byte(fmt.Sprintf("k%02d", i)) }
	apply := func(n uint64) {
		var ws []state.Write
		for i := range keys {
			ws = append(ws, state.Write{Store: "s", Key: key(i), Value: binary.BigEndian.AppendUint64(nil, n)})
		}
		if err := d.Apply(&state.Batch{Writes: ws, Offsets: statetest.OffsetsAt(int64(n))}); err != nil {
			t.Error(err)
		}
	}
	apply(0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				v, ok, err := r.SharedGet("s", key(3))
				if err != nil || !ok {
					errs <- fmt.Errorf("SharedGet: %v %v", ok, err)
					return
				}
				if n := binary.BigEndian.Uint64(v); n < last {
					errs <- fmt.Errorf("SharedGet went back from %d to %d", last, n)
					return
				} else {
					last = n
				}
				var seen []uint64
				err = r.SharedScan("s", nil, nil, func(_, v []byte) error {
					seen = append(seen, binary.BigEndian.Uint64(v))
					return nil
				})
				if err != nil || len(seen) != keys {
					errs <- fmt.Errorf("SharedScan: %d entries, %v", len(seen), err)
					return
				}
				for _, n := range seen {
					if n != seen[0] {
						errs <- fmt.Errorf("one scan saw two batches: %v", seen)
						return
					}
				}
			}
		}()
	}
	for n := uint64(1); n <= 200; n++ {
		apply(n)
		if _, _, err := d.Get("s", key(5)); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.SharedGet("s", key(1)); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("SharedGet after Close: %v, want ErrClosed", err)
	}
}
