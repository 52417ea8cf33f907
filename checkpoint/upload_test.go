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
// then the backend's preparation, which reads its offsets.
func (d *taskDB) checkpoint() (string, state.Offsets) {
	d.t.Helper()
	d.cps++
	dir := filepath.Join(d.t.TempDir(), fmt.Sprintf("cp%d", d.cps))
	if err := d.db.(state.Checkpointer).Checkpoint(dir); err != nil {
		d.t.Fatal(err)
	}
	o, err := d.backend.PrepareCheckpoint(dir)
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

// TestUploadIsIncremental: a second checkpoint that hard-links most of the
// first's tables, as Pebble's does, uploads exactly the files whose content
// the store lacks: the new table, the new log, and the MANIFEST that kept
// its name but not its content.
func TestUploadIsIncremental(t *testing.T) {
	forEachStore(t, func(t *testing.T, s checkpoint.Store) {
		rec := &recording{Store: s}
		up := checkpoint.NewUploader(rec, prefix, "0_1", 3)
		files := func(dir string, contents map[string][]byte) {
			t.Helper()
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for name, b := range contents {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		cp1, cp2 := filepath.Join(t.TempDir(), "cp1"), filepath.Join(t.TempDir(), "cp2")
		files(cp1, map[string][]byte{
			"000004.sst": noise([]byte("4"), 3<<20), "000005.sst": noise([]byte("5"), 1<<20),
			"000006.log": noise([]byte("log6"), 4096), "MANIFEST-000001": []byte("manifest v1"),
			"OPTIONS-000003": []byte("[Options]"), "LOCK": nil,
		})
		o := state.NewOffsets()
		o.Changelog["s"] = 10
		st1, err := up.Upload(ctx(t), cp1, o)
		if err != nil {
			t.Fatal(err)
		}
		if puts := rec.take(); st1.Files != 6 || st1.Uploaded != 5 || len(puts) != 6 {
			t.Fatalf("first upload %+v, puts %v; want the 5 files with content and a manifest", st1, puts)
		}
		// The second: 000004 hard-linked (the same file), 000005 gone to a
		// compaction, a new table, a new log, the MANIFEST appended to.
		files(cp2, map[string][]byte{
			"000007.sst": noise([]byte("7"), 1<<20), "000008.log": noise([]byte("log8"), 4096),
			"MANIFEST-000001": []byte("manifest v1 + edit"), "OPTIONS-000003": []byte("[Options]"), "LOCK": nil,
		})
		if err := os.Link(filepath.Join(cp1, "000004.sst"), filepath.Join(cp2, "000004.sst")); err != nil {
			t.Fatal(err)
		}
		o.Changelog["s"] = 20
		st2, err := up.Upload(ctx(t), cp2, o)
		if err != nil {
			t.Fatal(err)
		}
		m1, m2 := readManifest(t, s, 0), readManifest(t, s, 1)
		key := func(m *checkpoint.Manifest, name string) string {
			for _, f := range m.Files {
				if f.Name == name {
					return prefix + f.Key
				}
			}
			t.Fatalf("%s not in manifest %d", name, m.Seq)
			return ""
		}
		want := []string{key(m2, "000007.sst"), key(m2, "000008.log"), key(m2, "MANIFEST-000001"), prefix + "manifests/00000000000000000001.json"}
		puts := rec.take()
		slices.Sort(want)
		slices.Sort(puts)
		if !slices.Equal(puts, want) {
			t.Fatalf("second upload put %v; want exactly %v", puts, want)
		}
		if key(m1, "000004.sst") != key(m2, "000004.sst") || key(m1, "OPTIONS-000003") != key(m2, "OPTIONS-000003") {
			t.Fatal("unchanged files got new keys")
		}
		if key(m1, "MANIFEST-000001") == key(m2, "MANIFEST-000001") {
			t.Fatal("a MANIFEST whose content changed kept its key: the first checkpoint's would be overwritten")
		}
		if st2.Uploaded != 3 || st2.UploadedBytes != 1<<20+4096+int64(len("manifest v1 + edit")) || st2.Bytes != 3<<20+1<<20+4096+18+9 {
			t.Fatalf("second upload stats %+v", st2)
		}
		// The first checkpoint still restores: nothing it needs was
		// overwritten or collected.
		if _, err := checkpoint.Download(ctx(t), s, prefix, m1, filepath.Join(t.TempDir(), "r1")); err != nil {
			t.Fatalf("the first checkpoint no longer downloads: %v", err)
		}
		// Nothing moved: nothing is uploaded, no manifest written.
		st3, err := up.Upload(ctx(t), cp2, o)
		if err != nil || !st3.Skipped || st3.Written || len(rec.take()) != 0 {
			t.Fatalf("an unchanged state was uploaded again: %+v, %v", st3, err)
		}
		// A stored table truncated: the next checkpoint uploads it again
		// instead of referring to the damaged object.
		put(t, s, key(m2, "000004.sst"), "truncated")
		o.Changelog["s"] = 30
		if _, err := up.Upload(ctx(t), cp2, o); err != nil {
			t.Fatal(err)
		}
		if puts := rec.take(); !slices.Contains(puts, key(m2, "000004.sst")) {
			t.Fatalf("a damaged object was referred to again; puts %v", puts)
		}
		if _, err := checkpoint.Download(ctx(t), s, prefix, newest(t, s), filepath.Join(t.TempDir(), "r3")); err != nil {
			t.Fatalf("the checkpoint after the repair does not download: %v", err)
		}
	})
}

// TestUploadPebbleCheckpoints uploads a series of real Pebble checkpoints
// of a database being written: each upload puts exactly the files whose
// content the store lacks, and the last one restores. (How many tables two
// checkpoints share depends on Pebble's compactions in between; the
// benchmark reports it.)
func TestUploadPebbleCheckpoints(t *testing.T) {
	forEachStore(t, func(t *testing.T, s checkpoint.Store) {
		rec := &recording{Store: s}
		up := checkpoint.NewUploader(rec, prefix, "0_1", 10)
		d := newTaskDB(t)
		stored := map[string]bool{}
		for i := 0; i < 4; i++ {
			d.write(8000)
			st := d.upload(up)
			m := readManifest(t, s, st.Seq)
			var want []string
			for _, f := range m.Files {
				if f.Key != "" && !stored[prefix+f.Key] {
					want = append(want, prefix+f.Key)
					stored[prefix+f.Key] = true
				}
			}
			want = append(want, fmt.Sprintf("%smanifests/%020d.json", prefix, st.Seq))
			puts := rec.take()
			slices.Sort(want)
			slices.Sort(puts)
			if !slices.Equal(puts, want) {
				t.Fatalf("upload %d put %v; want exactly the new contents %v", i, puts, want)
			}
			t.Logf("checkpoint %d: %d files, %d bytes; uploaded %d files, %d bytes", i, st.Files, st.Bytes, st.Uploaded, st.UploadedBytes)
		}
		if m := newest(t, s); m.Offsets.Changelog["s"] != 32_007 || m.Offsets.StreamTime != 1_700_000_032_000 || m.Offsets.Input[0].Offset != 32_000 {
			t.Fatalf("manifest offsets %+v; want those of the 32,000th key", m.Offsets)
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

// TestRetentionLeavesNewerVersions: a manifest that a newer eddy wrote
// into the same store (a rolling upgrade) is neither deleted nor counted,
// and no file is deleted while one is there, since which files it lists
// cannot be known.
func TestRetentionLeavesNewerVersions(t *testing.T) {
	forEachStore(t, func(t *testing.T, s checkpoint.Store) {
		const future = prefix + "manifests/00000000000000000000.json"
		put(t, s, future, `{"version":2,"task":"0_1","seq":0,"files":[{"name":"000001.sst","blob":"files/future.sst"}]}`)
		put(t, s, prefix+"files/future.sst", "x")
		time.Sleep(1100 * time.Millisecond) // older than every checkpoint below (S3 clocks have 1s resolution)
		up := checkpoint.NewUploader(s, prefix, "0_1", 1)
		d := newTaskDB(t)
		for range 3 {
			d.write(3000)
			d.upload(up)
		}
		manifests, err := checkpoint.ListManifests(ctx(t), s, prefix)
		if err != nil {
			t.Fatal(err)
		}
		// The newest of this eddy's (keep 1), and the newer version's.
		want := []string{prefix + "manifests/00000000000000000003.json", future}
		if !slices.Equal(manifests, want) {
			t.Fatalf("manifests %v; want %v", manifests, want)
		}
		if !slices.Contains(keys(t, s, prefix+"files/"), prefix+"files/future.sst") {
			t.Fatal("a file that a newer version's manifest may list was deleted")
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
