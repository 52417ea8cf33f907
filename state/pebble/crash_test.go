package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/eddy-streams/eddy/state"
)

// crashWorkload applies batches to one database: each writes and deletes
// keys of store "s", some drop a key range, and each records its number
// as the input offset, so that a database's offsets say how many batches
// it reflects. ref[n] is the store's content after n batches.
type crashWorkload struct {
	batches []*state.Batch
	ref     []map[string]string
}

func newCrashWorkload(seed uint64) crashWorkload {
	rng := rand.New(rand.NewPCG(seed, 1))
	w := crashWorkload{ref: []map[string]string{{}}}
	value := bytes.Repeat([]byte{'v'}, 1500) // 50 keys of 1.5 KB a batch: memtable flushes and compactions
	for i := 1; i <= 40; i++ {
		cur := map[string]string{}
		for k, v := range w.ref[i-1] {
			cur[k] = v
		}
		b := &state.Batch{Offsets: state.Offsets{
			Input:      map[state.TopicPartition]int64{{Topic: "in", Partition: 0}: int64(i)},
			Changelog:  map[string]int64{"s": int64(i)},
			StreamTime: int64(i),
		}}
		if i%7 == 0 {
			lo, hi := fmt.Sprintf("k%03d", rng.IntN(200)), fmt.Sprintf("k%03d", rng.IntN(200))
			if lo > hi {
				lo, hi = hi, lo
			}
			b.Ranges = append(b.Ranges, state.DeleteRange{Store: "s", Lower: []byte(lo), Upper: []byte(hi)})
			for k := range cur {
				if k >= lo && k < hi {
					delete(cur, k)
				}
			}
		}
		for j := 0; j < 50; j++ {
			k := fmt.Sprintf("k%03d", rng.IntN(200))
			if rng.IntN(5) == 0 {
				b.Writes = append(b.Writes, state.Write{Store: "s", Key: []byte(k), Delete: true})
				delete(cur, k)
				continue
			}
			v := fmt.Sprintf("%d-%d-", i, j) + string(value)
			b.Writes = append(b.Writes, state.Write{Store: "s", Key: []byte(k), Value: []byte(v)})
			cur[k] = v
		}
		w.batches = append(w.batches, b)
		w.ref = append(w.ref, cur)
	}
	return w
}

// crashAt runs the workload on a crashable in-memory file system and, at
// its k-th write operation (files, directories, renames, syncs), clones
// the file system as a crash at that moment leaves it, keeping each
// unsynced write with probability unsynced percent. It returns the clone
// (nil if the run had fewer than k writes), how many Applies had returned
// before the clone began and when it ended, and the run's write count. The
// k-th write may come from Pebble's background work, and the clone does
// not stop the goroutine that applies batches: on a loaded machine it
// applied a dozen more while the clone was being taken, so the crash's
// moment is only known to lie between the two counts.
func crashAt(t *testing.T, w crashWorkload, k int64, unsynced int, rng *rand.Rand) (clone *vfs.MemFS, acked, ackedAfter int, writes int64) {
	mem := vfs.NewCrashableMem()
	var n atomic.Int64
	var ackedNow atomic.Int64
	var once sync.Once
	var cloned, clonedAfter int
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
			return nil
		}
		if n.Add(1) == k {
			once.Do(func() {
				cloned = int(ackedNow.Load())
				clone = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rand.New(rand.NewPCG(rng.Uint64(), 2))})
				clonedAfter = int(ackedNow.Load())
			})
		}
		return nil
	}))
	b := New(Options{FS: fs, MemTableSize: 1 << 20, CacheSize: 1 << 20})
	defer b.Close()
	db, err := b.Open("/db")
	if err != nil {
		t.Fatal(err)
	}
	for i, batch := range w.batches {
		if err := db.Apply(batch); err != nil {
			t.Fatalf("apply %d: %v", i+1, err)
		}
		ackedNow.Store(int64(i + 1))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return clone, cloned, clonedAfter, n.Load()
}

// TestCrashSweep is the crash sweep of issue 6: for increasing k, a crash
// at the k-th write of the workload, then a reopen. The reopened database
// must hold every batch whose Apply had returned (Apply syncs), at most
// the one being applied, and exactly the store content its offsets say;
// or be reported corrupt (state.ErrCorrupt), which makes the runtime
// rebuild it from the changelog. Anything else is a failure.
func TestCrashSweep(t *testing.T) {
	w := newCrashWorkload(7)
	rng := rand.New(rand.NewPCG(42, 42))
	_, _, _, total := crashAt(t, w, -1, 0, rng)
	// Every write point takes ~30 s (~580 reopens); by default every 4th
	// (every 20th under the race detector, which slows Pebble ~5×).
	// EDDY_CRASH_SWEEP=all checks them all.
	step := max(total/50, 1)
	if raceEnabled {
		step = max(total/10, 1)
	}
	if os.Getenv("EDDY_CRASH_SWEEP") == "all" {
		step = 1
	}
	t.Logf("the workload makes %d writes; crashing at every %d-th", total, step)
	var reopened, corrupt, extra int
	for k := int64(1); k <= total; k += step {
		for _, unsynced := range []int{0, 50, 100} {
			clone, acked, ackedAfter, _ := crashAt(t, w, k, unsynced, rng)
			if clone == nil {
				continue // this run made fewer writes (background work varies)
			}
			n, err := reopen(clone, w)
			switch {
			case errors.Is(err, state.ErrCorrupt):
				corrupt++
				continue
			case err != nil:
				t.Fatalf("crash at write %d (%d%% of unsynced data kept, %d batches acknowledged): reopen: %v", k, unsynced, acked, err)
			case n < acked:
				t.Fatalf("crash at write %d (%d%% unsynced kept): %d batches survive, %d were acknowledged", k, unsynced, n, acked)
			case n > ackedAfter+1:
				t.Fatalf("crash at write %d (%d%% unsynced kept): %d batches survive, only %d were acknowledged when the crash's copy was taken (+1 in flight)", k, unsynced, n, ackedAfter)
			}
			if n > acked {
				extra++
			}
			reopened++
		}
	}
	t.Logf("%d crashes reopened with exactly their offsets' content (%d holding batches applied while the copy was taken), %d reported corrupt", reopened, extra, corrupt)
	if reopened == 0 {
		t.Fatal("no crash point was checked")
	}
}

// reopen opens the crashed database and checks its content against the
// reference for the number of batches its offsets claim, which it returns.
func reopen(fs vfs.FS, w crashWorkload) (int, error) {
	b := New(Options{FS: fs})
	defer b.Close()
	db, err := b.Open("/db")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	o, err := db.Offsets()
	if err != nil {
		return 0, err
	}
	n := int(o.Input[state.TopicPartition{Topic: "in", Partition: 0}])
	if n < 0 || n >= len(w.ref) || o.Changelog["s"] != int64(n) || (n > 0 && o.StreamTime != int64(n)) {
		return 0, fmt.Errorf("offsets %+v do not name a batch of the workload", o)
	}
	got := map[string]string{}
	if err := db.Scan("s", nil, nil, func(k, v []byte) error {
		got[string(k)] = string(v)
		return nil
	}); err != nil {
		return 0, err
	}
	want := w.ref[n]
	if len(got) != len(want) {
		return 0, fmt.Errorf("after %d batches: %d keys, want %d (%s)", n, len(got), len(want), diff(got, want))
	}
	for k, v := range want {
		if got[k] != v {
			return 0, fmt.Errorf("after %d batches: key %s differs (%s)", n, k, diff(got, want))
		}
	}
	return n, nil
}

func diff(got, want map[string]string) string {
	var d []string
	for k := range want {
		if _, ok := got[k]; !ok {
			d = append(d, "-"+k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			d = append(d, "+"+k)
		}
	}
	sort.Strings(d)
	if len(d) > 10 {
		d = append(d[:10], "...")
	}
	return fmt.Sprint(d)
}
