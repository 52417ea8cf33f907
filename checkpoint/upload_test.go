package checkpoint_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/checkpoint"
	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/pebble"
)

const prefix = "app/0_1/"

// recording wraps a store and records the keys put.
type recording struct {
	checkpoint.Store
	mu   sync.Mutex
	puts []string
}

func (r *recording) Put(ctx context.Context, key string, rd io.Reader, size int64) error {
	r.mu.Lock()
	r.puts = append(r.puts, key)
	r.mu.Unlock()
	return r.Store.Put(ctx, key, rd, size)
}

func (r *recording) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.puts
	r.puts = nil
	return p
}

// taskDB is a task database on disk that the tests write and checkpoint
// the way the runtime does.
type taskDB struct {
	t       *testing.T
	backend *pebble.Backend
	dir     string
	db      state.DB
	n       int // keys written
	cps     int
}

func newTaskDB(t *testing.T) *taskDB {
	// A small memtable, so a few thousand keys make several tables and
	// the later checkpoints share most of them with the earlier ones.
	b := pebble.New(pebble.Options{MemTableSize: 256 << 10})
	t.Cleanup(func() { b.Close() })
	d := &taskDB{t: t, backend: b, dir: filepath.Join(t.TempDir(), "0_1")}
	db, err := b.Open(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.db.Close() })
	d.db = db
	return d
}

func (d *taskDB) offsets() state.Offsets {
	o := state.NewOffsets()
	o.Input[state.TopicPartition{Topic: "in", Partition: 1}] = int64(d.n)
	o.Changelog["s"] = int64(d.n) + 7
	o.StreamTime = 1_700_000_000_000 + int64(d.n)
	return o
}

// write applies n more keys of ~200 bytes in batches of 100.
func (d *taskDB) write(n int) {
	d.t.Helper()
	for n > 0 {
		var ws []state.Write
		for i := 0; i < min(n, 100); i++ {
			key := fmt.Appendf(nil, "key-%07d", d.n)
			ws = append(ws, state.Write{Store: "s", Key: key, Value: noise(key, 200)})
			d.n++
		}
		n -= len(ws)
		if err := d.db.Apply(&state.Batch{Writes: ws, Offsets: d.offsets()}); err != nil {
			d.t.Fatal(err)
		}
	}
}

// noise returns n incompressible bytes derived from seed, so tables have a
// known size.
func noise(seed []byte, n int) []byte {
	var out []byte
	sum := sha256.Sum256(seed)
	for len(out) < n {
		out = append(out, sum[:]...)
		sum = sha256.Sum256(sum[:])
	}
	return out[:n]
}

// checkpoint takes a checkpoint as the runtime does: Pebble's checkpoint,
// then a read-only open of the copy that reads its offsets.
func (d *taskDB) checkpoint() (string, state.Offsets) {
	d.t.Helper()
	d.cps++
	dir := filepath.Join(d.t.TempDir(), fmt.Sprintf("cp%d", d.cps))
	if err := d.db.(state.Checkpointer).Checkpoint(dir); err != nil {
		d.t.Fatal(err)
	}
	o, err := d.backend.ReadCheckpoint(dir)
	if err != nil {
		d.t.Fatal(err)
	}
	return dir, o
}

func (d *taskDB) upload(up *checkpoint.Uploader) checkpoint.UploadStats {
	d.t.Helper()
	dir, o := d.checkpoint()
	st, err := up.Upload(ctx(d.t), dir, o)
	if err != nil {
		d.t.Fatal(err)
	}
	return st
}

func readManifest(t *testing.T, s checkpoint.Store, seq int64) *checkpoint.Manifest {
	t.Helper()
	m, err := checkpoint.ReadManifest(ctx(t), s, fmt.Sprintf("%smanifests/%020d.json", prefix, seq))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// settle waits until Pebble's background compactions are done, which two
// successive checkpoints with the same tables show, so that the next
// checkpoint differs from the last only by what the test writes.
func (d *taskDB) settle() {
	d.t.Helper()
	tables := func() []string {
		dir, _ := d.checkpoint()
		entries, err := os.ReadDir(dir)
		if err != nil {
			d.t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".sst") {
				names = append(names, e.Name())
			}
		}
		return names
	}
	last := tables()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		now := tables()
		if slices.Equal(now, last) {
			return
		}
		last = now
	}
	d.t.Fatal("Pebble's compactions did not settle in 30s")
}

// TestUploadIsIncremental: the second checkpoint uploads exactly the files
// whose content the store lacks, and the tables it shares with the first,
// most of its bytes, are not sent again.
func TestUploadIsIncremental(t *testing.T) {
	forEachStore(t, func(t *testing.T, s checkpoint.Store) {
		rec := &recording{Store: s}
		up := checkpoint.NewUploader(rec, prefix, "0_1", 3)
		d := newTaskDB(t)
		// 6 MB: more than Pebble's 4 MB target size of a table in the
		// base level, so there are several tables.
		d.write(30_000)
		d.settle()
		st1 := d.upload(up)
		puts1 := rec.take()
		if st1.Uploaded == 0 || st1.Uploaded != len(puts1)-1 || st1.Seq != 0 {
			t.Fatalf("first upload %+v with %d puts; want every file with content and one manifest, seq 0", st1, len(puts1))
		}
		d.write(100) // stays in the memtable: no flush, no compaction
		st2 := d.upload(up)
		puts2 := rec.take()
		m1, m2 := readManifest(t, s, 0), readManifest(t, s, 1)
		inFirst := map[string]bool{}
		for _, f := range m1.Files {
			inFirst[f.Key] = true
		}
		var want []string
		var sharedBytes int64
		for _, f := range m2.Files {
			switch {
			case f.Key == "":
			case inFirst[f.Key]:
				sharedBytes += f.Size
			default:
				want = append(want, prefix+f.Key)
			}
		}
		want = append(want, prefix+"manifests/00000000000000000001.json")
		slices.Sort(want)
		slices.Sort(puts2)
		if !slices.Equal(puts2, want) {
			t.Fatalf("second upload put %v; want exactly the files the first lacked and the manifest %v", puts2, want)
		}
		// The tables did not change: only the log and the MANIFEST did.
		if sharedBytes < st2.Bytes*3/4 || st2.UploadedBytes != st2.Bytes-sharedBytes {
			t.Fatalf("second upload %+v shares %d bytes with the first; want the tables (most bytes) shared", st2, sharedBytes)
		}
		t.Logf("first: %d files, %d bytes; second: %d of %d files, %d of %d bytes uploaded",
			st1.Files, st1.Bytes, st2.Uploaded, st2.Files, st2.UploadedBytes, st2.Bytes)
		if m2.Offsets.Changelog["s"] != 30_107 || m2.Offsets.StreamTime != 1_700_000_030_100 || m2.Offsets.Input[0].Offset != 30_100 {
			t.Fatalf("manifest offsets %+v; want those of the 30,100th key", m2.Offsets)
		}

		// Nothing moved: nothing is uploaded, no manifest written.
		st3 := d.upload(up)
		if !st3.Skipped || st3.Written || len(rec.take()) != 0 {
			t.Fatalf("an unchanged state was uploaded again: %+v", st3)
		}
	})
}

// TestRetention keeps the newest checkpoints and deletes what only older
// ones need, and orphans older than the oldest kept checkpoint, never files
// that might belong to an upload in flight.
func TestRetention(t *testing.T) {
	forEachStore(t, func(t *testing.T, s checkpoint.Store) {
		up := checkpoint.NewUploader(s, prefix, "0_1", 2)
		d := newTaskDB(t)
		// An orphan of a crashed upload, older than the checkpoints below
		// (S3 clocks have 1s resolution).
		put(t, s, prefix+"files/orphan-old.sst", "x")
		time.Sleep(1100 * time.Millisecond)
		deleted := 0
		for i := 0; i < 5; i++ {
			d.write(3000)
			st := d.upload(up)
			deleted += st.Deleted
			if i == 3 {
				// Newer than the oldest kept checkpoint after the next
				// upload: it may be an upload in flight elsewhere.
				time.Sleep(1100 * time.Millisecond)
				put(t, s, prefix+"files/in-flight.sst", "y")
			}
		}
		manifests, err := checkpoint.ListManifests(ctx(t), s, prefix)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{prefix + "manifests/00000000000000000004.json", prefix + "manifests/00000000000000000003.json"}
		if !slices.Equal(manifests, want) {
			t.Fatalf("manifests %v; want the newest two %v", manifests, want)
		}
		referenced := map[string]bool{}
		for _, seq := range []int64{3, 4} {
			for _, f := range readManifest(t, s, seq).Files {
				if f.Key != "" {
					referenced[prefix+f.Key] = true
				}
			}
		}
		stored := map[string]bool{}
		for _, k := range keys(t, s, prefix+"files/") {
			stored[k] = true
			if !referenced[k] && k != prefix+"files/in-flight.sst" {
				t.Errorf("%s is kept but no kept checkpoint needs it", k)
			}
		}
		for k := range referenced {
			if !stored[k] {
				t.Errorf("%s is needed by a kept checkpoint and was deleted", k)
			}
		}
		if !stored[prefix+"files/in-flight.sst"] {
			t.Error("a file newer than the oldest kept checkpoint was deleted; it may be an upload in flight")
		}
		if deleted == 0 {
			t.Fatal("no file was ever deleted")
		}
	})
}

// TestRestoreRoundTrip downloads a checkpoint into a new directory: it
// opens with the data and offsets of the moment it was taken.
func TestRestoreRoundTrip(t *testing.T) {
	forEachStore(t, func(t *testing.T, s checkpoint.Store) {
		d := newTaskDB(t)
		d.write(5000)
		up := checkpoint.NewUploader(s, prefix, "0_1", 3)
		d.upload(up)
		want := d.offsets()
		d.write(10) // not in the checkpoint
		m := newest(t, s)
		dir := filepath.Join(t.TempDir(), "restored")
		st, err := checkpoint.Download(ctx(t), s, prefix, m, dir)
		if err != nil {
			t.Fatal(err)
		}
		if st.Files != len(m.Files) || st.Bytes == 0 {
			t.Fatalf("download stats %+v for %d files", st, len(m.Files))
		}
		db, err := d.backend.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		got, err := db.Offsets()
		if err != nil || !checkpoint.Equal(got, want) || !checkpoint.Equal(m.Offsets.State(), want) {
			t.Fatalf("restored offsets %v (manifest %v), %v; want %v", got, m.Offsets.State(), err, want)
		}
		n := 0
		err = db.Scan("s", nil, nil, func(k, v []byte) error {
			if want := fmt.Sprintf("key-%07d", n); string(k) != want {
				return fmt.Errorf("key %d is %s, want %s", n, k, want)
			}
			n++
			return nil
		})
		if err != nil || n != 5000 {
			t.Fatalf("restored %d keys, %v; want 5000", n, err)
		}
	})
}

func newest(t *testing.T, s checkpoint.Store) *checkpoint.Manifest {
	t.Helper()
	keys, err := checkpoint.ListManifests(ctx(t), s, prefix)
	if err != nil || len(keys) == 0 {
		t.Fatalf("manifests: %v, %v", keys, err)
	}
	m, err := checkpoint.ReadManifest(ctx(t), s, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDownloadDetectsDamage: a file that changed, shrank, grew or went
// missing in the store, or a manifest that does not decode, is reported as
// ErrDamaged (the runtime then tries an older checkpoint), and a failed
// download leaves no directory behind.
func TestDownloadDetectsDamage(t *testing.T) {
	damages := []struct {
		name string
		fn   func(t *testing.T, s checkpoint.Store, key string, body []byte)
	}{
		{"byte flipped", func(t *testing.T, s checkpoint.Store, key string, b []byte) {
			b[len(b)/2] ^= 0x01
			put(t, s, key, string(b))
		}},
		{"truncated", func(t *testing.T, s checkpoint.Store, key string, b []byte) { put(t, s, key, string(b[:len(b)-1])) }},
		{"longer", func(t *testing.T, s checkpoint.Store, key string, b []byte) { put(t, s, key, string(b)+"!") }},
		{"deleted", func(t *testing.T, s checkpoint.Store, key string, b []byte) {
			if err := s.Delete(ctx(t), key); err != nil {
				t.Fatal(err)
			}
		}},
	}
	forEachStore(t, func(t *testing.T, s checkpoint.Store) {
		d := newTaskDB(t)
		d.write(3000)
		up := checkpoint.NewUploader(s, prefix, "0_1", 3)
		d.upload(up)
		m := newest(t, s)
		var table checkpoint.File
		for _, f := range m.Files {
			if strings.HasSuffix(f.Name, ".sst") {
				table = f
			}
		}
		if table.Key == "" {
			t.Fatalf("no table in %+v", m.Files)
		}
		original, err := get(t, s, prefix+table.Key)
		if err != nil {
			t.Fatal(err)
		}
		for _, dm := range damages {
			t.Run(dm.name, func(t *testing.T) {
				dm.fn(t, s, prefix+table.Key, []byte(original))
				defer put(t, s, prefix+table.Key, original)
				dir := filepath.Join(t.TempDir(), "restored")
				_, err := checkpoint.Download(ctx(t), s, prefix, m, dir)
				if !errorsIs(err, checkpoint.ErrDamaged) || !strings.Contains(err.Error(), table.Name) {
					t.Fatalf("download: %v; want ErrDamaged naming %s", err, table.Name)
				}
				if _, err := os.Stat(dir); !os.IsNotExist(err) {
					t.Fatalf("a failed download left %s: %v", dir, err)
				}
			})
		}
		t.Run("manifest garbled", func(t *testing.T) {
			keys, _ := checkpoint.ListManifests(ctx(t), s, prefix)
			put(t, s, keys[0], `{"version": 1, "task": "0_1", "files": [{"name": "../escape"`)
			if _, err := checkpoint.ReadManifest(ctx(t), s, keys[0]); !errorsIs(err, checkpoint.ErrDamaged) {
				t.Fatalf("read of a garbled manifest: %v; want ErrDamaged", err)
			}
		})
	})
}
