package statetest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/disk"
	"github.com/eddy-streams/eddy/state/internal/keys"
	"github.com/eddy-streams/eddy/state/internal/offsetcodec"
)

// Disk describes a backend that keeps its databases in files, for RunDisk.
type Disk struct {
	// New returns a fresh backend on the OS file system, with memtables
	// of 1 MiB (so that a batch of 2 MiB is larger than one), and
	// arranges its cleanup (t.Cleanup).
	New func(t *testing.T) state.Backend
	// Flush writes the memtable of db into a table file and waits for it.
	Flush func(t *testing.T, db state.DB)
	// Compact compacts every store key of db and waits for it.
	Compact func(t *testing.T, db state.DB)
	// GetRaw and SetRaw read and write one key of db below the store
	// layout (state/internal/keys), synced; SetRaw deletes key when value
	// is nil. The suite plants damaged metadata and older formats with
	// them.
	GetRaw func(t *testing.T, db state.DB, key []byte) ([]byte, bool)
	SetRaw func(t *testing.T, db state.DB, key, value []byte)
	// Damages are damages to the backend's own files that it must report
	// as state.ErrCorrupt, beside the suite's (tables and MANIFEST).
	Damages []Damage
	// VerifiesAtOpen says that the backend's Open checks every table's
	// checksums: every damage must then be reported by Open, not by the
	// first read that meets it.
	VerifiesAtOpen bool
	// Format1 is a directory holding a database written by the
	// unversioned format (format 1) of this backend, as Format1Want
	// describes; the suite opens a copy of it.
	Format1 string
}

// Damage is one way of damaging the files of a database: Fn is applied to
// every file whose name has the prefix or the suffix Affix.
type Damage struct {
	Name  string
	Affix string
	Fn    func(path string, data []byte) error
}

// Overwrite returns a Damage function that replaces a file's content by
// what fn makes of it.
func Overwrite(fn func([]byte) []byte) func(string, []byte) error {
	return func(path string, b []byte) error { return os.WriteFile(path, fn(b), 0o644) }
}

// Remove is a Damage function that removes the file.
func Remove(path string, _ []byte) error { return os.Remove(path) }

// Garbage returns n bytes that are no file format's.
func Garbage(n int) []byte { return bytes.Repeat([]byte("garbage!"), n/8+1)[:n] }

// commonDamages are what both engines, sharing the LevelDB file layout,
// must report: damaged tables (by checksum, or by the size the MANIFEST
// records) and a damaged MANIFEST.
var commonDamages = []Damage{
	{"table byte flipped", ".sst", Overwrite(func(b []byte) []byte { b[len(b)/3] ^= 0xff; return b })},
	{"table overwritten, same size", ".sst", Overwrite(func(b []byte) []byte { return Garbage(len(b)) })},
	{"table truncated", ".sst", Overwrite(func(b []byte) []byte { return b[:len(b)/2] })},
	{"table overwritten, longer", ".sst", Overwrite(func(b []byte) []byte { return Garbage(2 * len(b)) })},
	{"table removed", ".sst", Remove},
	{"manifest overwritten", "MANIFEST-", Overwrite(func(b []byte) []byte { return Garbage(len(b) + 100) })},
	{"manifest emptied", "MANIFEST-", Overwrite(func([]byte) []byte { return nil })},
	{"manifest removed", "MANIFEST-", Remove},
}

// RunDisk runs Run, and what every disk backend must do beyond it: report
// damaged files and metadata as state.ErrCorrupt, keep offsets and state
// together when its log is damaged, keep a batch's writes over its ranges
// through flushes and compactions, refuse a newer format with
// state.ErrFormat, and migrate format 1.
func RunDisk(t *testing.T, d Disk) {
	t.Run("Conformance", func(t *testing.T) { Run(t, d.New) })
	t.Run("CorruptFiles", func(t *testing.T) {
		for _, dm := range append(append([]Damage(nil), commonDamages...), d.Damages...) {
			t.Run(dm.Name, func(t *testing.T) { testCorruptFile(t, d, dm) })
		}
	})
	t.Run("CorruptOffsets", func(t *testing.T) {
		testCorruptMeta(t, d, keys.Offsets(), []byte{offsetcodec.Version, 5, 1}, offsetcodec.ErrMalformed)
	})
	t.Run("CorruptFormat", func(t *testing.T) { testCorruptMeta(t, d, keys.Format(), []byte{0xff, 0xff}, nil) })
	t.Run("WALDamageKeepsOffsetsConsistent", func(t *testing.T) { testWALDamage(t, d) })
	t.Run("DeleteRangeTables", func(t *testing.T) { testDeleteRangeTables(t, d) })
	t.Run("NewerFormatRefused", func(t *testing.T) { testNewerFormat(t, d) })
	t.Run("Format1Migrated", func(t *testing.T) { testFormat1Migrated(t, d) })
	if d.Format1 != "" {
		t.Run("Format1Testdata", func(t *testing.T) { testFormat1Testdata(t, d) })
	}
}

// OffsetsAt returns offsets at n: of input partition in/0 and of store
// "s".
func OffsetsAt(n int64) state.Offsets {
	return state.Offsets{
		Input:     map[state.TopicPartition]int64{{Topic: "in", Partition: 0}: n},
		Changelog: map[string]int64{"s": n},
	}
}

// fill writes 1000 keys and offsets, flushes them into a table file (so
// there is one to damage), and closes the database.
func fill(t *testing.T, d Disk, b state.Backend, dir string) {
	t.Helper()
	db := Open(t, b, dir)
	writes := make([]state.Write, 0, 1000)
	for i := range 1000 {
		writes = append(writes, state.Write{Store: "s", Key: fmt.Appendf(nil, "k%05d", i), Value: bytes.Repeat([]byte{'v'}, 100)})
	}
	if err := db.Apply(&state.Batch{Writes: writes, Offsets: OffsetsAt(1000)}); err != nil {
		t.Fatal(err)
	}
	d.Flush(t, db)
	mustClose(t, db)
}

// damage applies fn to every file of dir whose name has affix as prefix or
// suffix, and fails if there is none.
func damage(t *testing.T, dir, affix string, fn func(path string, data []byte) error) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), affix) && !strings.HasSuffix(e.Name(), affix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := fn(path, data); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("no file matching %q in %s", affix, dir)
	}
}

// openAndRead opens dir and reads everything, returning the first error: a
// damaged file may be noticed at Open or only when a read reaches it.
func openAndRead(b state.Backend, dir string) (where string, err error) {
	db, err := b.Open(dir)
	if err != nil {
		return "open", err
	}
	defer db.Close()
	if err := db.Scan("s", nil, nil, func(k, v []byte) error { return nil }); err != nil {
		return "scan", err
	}
	for i := range 1000 {
		if _, _, err := db.Get("s", fmt.Appendf(nil, "k%05d", i)); err != nil {
			return "get", err
		}
	}
	return "", nil
}

// wantRebuilt does what the runtime does with a corrupt database, destroy
// it and open again, and checks that the new one is empty.
func wantRebuilt(t *testing.T, b state.Backend, dir string) {
	t.Helper()
	if err := b.Destroy(dir); err != nil {
		t.Fatal(err)
	}
	db := Open(t, b, dir)
	defer db.Close()
	wantOffsets(t, db, state.NewOffsets())
}

func testCorruptFile(t *testing.T, d Disk, dm Damage) {
	b := d.New(t)
	dir := t.TempDir()
	fill(t, d, b, dir)
	damage(t, dir, dm.Affix, dm.Fn)
	where, err := openAndRead(b, dir)
	if !errors.Is(err, state.ErrCorrupt) {
		t.Fatalf("%s: %v; want an error wrapping state.ErrCorrupt", where, err)
	}
	if d.VerifiesAtOpen && where != "open" {
		t.Fatalf("reported by %s, not by Open, which verifies checksums: %v", where, err)
	}
	t.Logf("reported at %s: %v", where, err)
	wantRebuilt(t, b, dir)
}

// testCorruptMeta plants value under a metadata key: Open must report it
// corrupt (wrapping also want, if not nil) and leave the directory closed.
func testCorruptMeta(t *testing.T, d Disk, key, value []byte, want error) {
	b := d.New(t)
	dir := t.TempDir()
	db := Open(t, b, dir)
	d.SetRaw(t, db, key, value)
	mustClose(t, db)
	_, err := b.Open(dir)
	if !errors.Is(err, state.ErrCorrupt) || want != nil && !errors.Is(err, want) {
		t.Fatalf("Open with %x under %q: %v; want ErrCorrupt (wrapping %v)", value, key, err, want)
	}
	wantRebuilt(t, b, dir)
}

// testWALDamage pins the property that makes an engine's silent stop at a
// damaged log record harmless: what survives is a prefix of the Applies,
// each with its own offsets.
func testWALDamage(t *testing.T, d Disk) {
	b := d.New(t)
	dir := t.TempDir()
	db := Open(t, b, dir)
	const n = 200
	for i := range int64(n) {
		w := state.Write{Store: "s", Key: []byte("counter"), Value: fmt.Appendf(nil, "%d", i+1)}
		if err := db.Apply(&state.Batch{Writes: []state.Write{w}, Offsets: OffsetsAt(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	mustClose(t, db)
	damage(t, dir, ".log", Overwrite(func(b []byte) []byte {
		if len(b) > 1000 {
			b[len(b)/3] ^= 0x55
		}
		return b
	}))
	db, err := b.Open(dir)
	if errors.Is(err, state.ErrCorrupt) {
		t.Logf("WAL damage reported: %v", err)
		return // also acceptable: the runtime rebuilds
	}
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v, ok, err := db.Get("s", []byte("counter"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := db.Offsets()
	if err != nil {
		t.Fatal(err)
	}
	want := "0"
	if ok {
		want = string(v)
	}
	if got := fmt.Sprint(o.Changelog["s"]); got != want {
		t.Fatalf("after WAL damage: counter %q with changelog offset %s; want them equal", want, got)
	}
	if want == fmt.Sprint(n) {
		t.Fatalf("all %d Applies survived; the damage missed the WAL", n)
	}
	t.Logf("WAL damage: %s of %d synced Applies survived, without error", want, n)
}

// testNewerFormat: a database of a format newer than this eddy's is
// refused with state.ErrFormat, not taken for damage (which the runtime
// would discard), and left as it is.
func testNewerFormat(t *testing.T, d Disk) {
	b := d.New(t)
	dir := t.TempDir()
	db := Open(t, b, dir)
	apply(t, db, put("s", "k", "v"))
	newer := disk.FormatNewest + 1
	d.SetRaw(t, db, keys.Format(), disk.AppendFormat(nil, newer))
	mustClose(t, db)
	_, err := b.Open(dir)
	if !errors.Is(err, state.ErrFormat) || errors.Is(err, state.ErrCorrupt) {
		t.Fatalf("Open of format %d: %v; want ErrFormat and not ErrCorrupt", newer, err)
	}
	for _, want := range []string{"eddy: ", dir, fmt.Sprintf("state format %d", newer), fmt.Sprintf("formats %d to %d", disk.FormatMinSupported, disk.FormatNewest), "delete the directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	t.Log(err)
	// Refused, not changed: a second Open says the same, and the
	// directory is not held open.
	if _, err := b.Open(dir); !errors.Is(err, state.ErrFormat) {
		t.Fatalf("second Open: %v; want ErrFormat again", err)
	}
	wantRebuilt(t, b, dir)
}

// toFormat1 rewrites db's metadata as format 1 laid it out.
func toFormat1(t *testing.T, d Disk, db state.DB) {
	t.Helper()
	v, ok := d.GetRaw(t, db, keys.Offsets())
	if !ok {
		t.Fatal("no offsets key in a format 2 database")
	}
	d.SetRaw(t, db, keys.OffsetsV1(), v)
	d.SetRaw(t, db, keys.Offsets(), nil)
	d.SetRaw(t, db, keys.Format(), nil)
}

// wantFormat2 checks db's metadata as format 2 lays it out. (That the
// offsets are under format 2's key shows in Offsets after a reopen: Open
// of a format 2 database reads no other.)
func wantFormat2(t *testing.T, d Disk, db state.DB) {
	t.Helper()
	v, ok := d.GetRaw(t, db, keys.Format())
	if !ok || !bytes.Equal(v, disk.AppendFormat(nil, disk.FormatV2)) {
		t.Errorf("format key = %x, %v; want %x", v, ok, disk.AppendFormat(nil, disk.FormatV2))
	}
	if v, ok := d.GetRaw(t, db, keys.OffsetsV1()); !ok || !bytes.Equal(v, disk.V1Guard) {
		t.Errorf("format 1's offsets key holds %x, %v; want the guard %x that an older eddy takes for corrupt offsets", v, ok, disk.V1Guard)
	}
}

func testFormat1Migrated(t *testing.T, d Disk) {
	b := d.New(t)
	dir := t.TempDir()
	db := Open(t, b, dir)
	wantFormat2(t, d, db) // a new database is stamped at once
	offsets := sampleOffsets()
	if err := db.Apply(&state.Batch{Writes: []state.Write{put("s", "a", "1"), put("t", "b", "2")}, Offsets: offsets}); err != nil {
		t.Fatal(err)
	}
	toFormat1(t, d, db)
	mustClose(t, db)
	db = Open(t, b, dir)
	wantOffsets(t, db, offsets)
	wantGet(t, db, "s", "a", "1", true)
	wantScan(t, db, "t", nil, nil, []KV{{"b", "2"}})
	wantFormat2(t, d, db)
	// The migrated database goes on like any other.
	offsets.Changelog["s"]++
	if err := db.Apply(&state.Batch{Writes: []state.Write{put("s", "a", "3")}, Offsets: offsets}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, db)
	db = Open(t, b, dir)
	defer db.Close()
	wantOffsets(t, db, offsets)
	wantGet(t, db, "s", "a", "3", true)
}

// Format1Want is what the Format1 databases of the backends' testdata
// hold, as eddy's format 1 wrote them (testdata/README.md of each backend
// says how):
//
//   - store "counts": "user-000" → "updated", "user-002".."user-049" → i*i
//     in decimal ("user-001" was deleted);
//   - store "windows": {0, 0, 1, i, 'k'} → {i} for i in 0..19;
//   - store "empty-value": "k" → empty;
//   - offsets: input payments/3 at 1240 and app-repartition/3 at 56,
//     changelog counts 702, windows 80, empty-value 1, stream time
//     1700000000123.
func Format1Want() (map[string][]KV, state.Offsets) {
	counts := []KV{{"user-000", "updated"}}
	for i := 2; i < 50; i++ {
		counts = append(counts, KV{fmt.Sprintf("user-%03d", i), fmt.Sprint(i * i)})
	}
	var windows []KV
	for i := range 20 {
		windows = append(windows, KV{string([]byte{0, 0, 1, byte(i), 'k'}), string([]byte{byte(i)})})
	}
	return map[string][]KV{"counts": counts, "windows": windows, "empty-value": {{"k", ""}}},
		state.Offsets{
			Input:      map[state.TopicPartition]int64{{Topic: "payments", Partition: 3}: 1240, {Topic: "app-repartition", Partition: 3}: 56},
			Changelog:  map[string]int64{"counts": 702, "windows": 80, "empty-value": 1},
			StreamTime: 1_700_000_000_123,
		}
}

// testFormat1Testdata opens a copy of a database that eddy's format 1
// wrote (not one this suite made look like it) and checks that it was
// migrated with everything it held.
func testFormat1Testdata(t *testing.T, d Disk) {
	dir := filepath.Join(t.TempDir(), "task")
	if err := os.CopyFS(dir, os.DirFS(d.Format1)); err != nil {
		t.Fatal(err)
	}
	b := d.New(t)
	db := Open(t, b, dir)
	stores, offsets := Format1Want()
	check := func(when string) {
		t.Helper()
		wantOffsets(t, db, offsets)
		for store, want := range stores {
			if got := Scan(t, db, store, nil, nil); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: store %s = %q; want %q", when, store, got, want)
			}
		}
		wantFormat2(t, d, db)
	}
	check("migrated")
	mustClose(t, db)
	db = Open(t, b, dir)
	defer db.Close()
	check("reopened")
}

// DeleteRangeTables sets up a check of the order of ranges and writes where
// an engine keeps them apart: it writes 2000 keys into each of the stores w
// and w2 and flushes them into a table file, then applies one batch that
// drops all of w, rewrites every tenth key of it, and carries 2 MiB of other
// writes, more than a memtable of 1 MiB. It returns the check of the
// result, to run after what the engine does next: a flush, a compaction
// that must drop the covered keys but not the batch's writes, a reopen, a
// crash.
func DeleteRangeTables(t *testing.T, db state.DB, flush func(*testing.T, state.DB)) (check func(when string, db state.DB)) {
	t.Helper()
	var writes []state.Write
	for i := range 2000 {
		for _, s := range []string{"w", "w2"} {
			writes = append(writes, state.Write{Store: s, Key: fmt.Appendf(nil, "k%05d", i), Value: []byte("old")})
		}
	}
	if err := db.Apply(&state.Batch{Writes: writes}); err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	writes = writes[:0]
	for i := 0; i < 2000; i += 10 {
		writes = append(writes, state.Write{Store: "w", Key: fmt.Appendf(nil, "k%05d", i), Value: []byte("new")})
	}
	writes = append(writes, state.Write{Store: "big", Key: []byte("k"), Value: bytes.Repeat([]byte{'x'}, 2<<20)})
	if err := db.Apply(&state.Batch{Ranges: []state.DeleteRange{{Store: "w"}}, Writes: writes, Offsets: OffsetsAt(7)}); err != nil {
		t.Fatal(err)
	}
	return func(when string, db state.DB) {
		t.Helper()
		got := Scan(t, db, "w", nil, nil)
		if len(got) != 200 {
			t.Fatalf("%s: %d keys in w; want the 200 the batch rewrote", when, len(got))
		}
		for i, kv := range got {
			if want := fmt.Sprintf("k%05d", i*10); kv.Key != want || kv.Value != "new" {
				t.Fatalf("%s: key %d = %v; want %s=new", when, i, kv, want)
			}
		}
		if n := len(Scan(t, db, "w2", nil, nil)); n != 2000 {
			t.Fatalf("%s: %d keys in w2; want 2000 (the range is w's alone)", when, n)
		}
		if o, _ := db.Offsets(); o.Changelog["s"] != 7 {
			t.Fatalf("%s: offsets %v; want the batch's", when, o)
		}
	}
}

func testDeleteRangeTables(t *testing.T, d Disk) {
	b := d.New(t)
	dir := t.TempDir()
	db := Open(t, b, dir)
	check := DeleteRangeTables(t, db, d.Flush)
	check("after apply", db)
	d.Flush(t, db)
	check("after flush", db)
	d.Compact(t, db)
	check("after compaction", db)
	mustClose(t, db)
	db = Open(t, b, dir)
	check("after reopen", db)
}

// ParseOptionsFile parses the OPTIONS file that Pebble and RocksDB write
// into a database directory (an INI file) into section → key → value: what
// the engine itself recorded that it runs with, for a backend's test that
// its Options reach the engine.
func ParseOptionsFile(data []byte) map[string]map[string]string {
	out := map[string]map[string]string{}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			section = strings.Trim(line, "[]")
			out[section] = map[string]string{}
		} else if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[section][k] = v
		}
	}
	return out
}
