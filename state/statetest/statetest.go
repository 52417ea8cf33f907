// Package statetest is the conformance suite that every state.Backend must
// pass. Running one suite against every backend is what lets tests use the
// memory backend and trust the result for Pebble.
package statetest

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/state"
)

// Run runs the suite. newBackend returns a fresh backend for one subtest and
// arranges its cleanup (t.Cleanup); directories passed to it come from
// t.TempDir, so disk backends need no other setup.
func Run(t *testing.T, newBackend func(t *testing.T) state.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b state.Backend, dir string)
	}{
		{"GetPutDelete", testGetPutDelete},
		{"GetReturnsCopy", testGetReturnsCopy},
		{"Scan", testScan},
		{"ScanStopsOnError", testScanStopsOnError},
		{"ScanCallsGet", testScanCallsGet},
		{"ScanAfterApply", testScanAfterApply},
		{"ScanInScan", testScanInScan},
		{"BinaryKeys", testBinaryKeys},
		{"StoreIsolation", testStoreIsolation},
		{"InvalidStoreName", testInvalidStoreName},
		{"OffsetsNew", testOffsetsNew},
		{"OffsetsRoundTrip", testOffsetsRoundTrip},
		{"StreamTime", testStreamTime},
		{"ApplyAtomic", testApplyAtomic},
		{"ApplyInBackground", testApplyInBackground},
		{"DeleteRange", testDeleteRange},
		{"DeleteRangeStoreNames", testDeleteRangeStoreNames},
		{"DeleteRangeThenWrites", testDeleteRangeThenWrites},
		{"DeleteRangeAtomic", testDeleteRangeAtomic},
		{"DeleteRangeReopen", testDeleteRangeReopen},
		{"LargeBatch", testLargeBatch},
		{"Reopen", testReopen},
		{"Destroy", testDestroy},
		{"DirsIndependent", testDirsIndependent},
		{"OpenTwice", testOpenTwice},
		{"UseAfterClose", testUseAfterClose},
		{"ConcurrentDirs", testConcurrentDirs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newBackend(t), filepath.Join(t.TempDir(), "task"))
		})
	}
}

// KV is one key and value, as a scan yields them.
type KV struct{ Key, Value string }

// Scan collects a whole scan of store in [lower, upper) as KVs, failing the
// test on error.
func Scan(t testing.TB, db state.DB, store string, lower, upper []byte) []KV {
	t.Helper()
	var got []KV
	err := db.Scan(store, lower, upper, func(k, v []byte) error {
		got = append(got, KV{string(k), string(v)})
		return nil
	})
	if err != nil {
		t.Fatalf("Scan(%q, %q, %q): %v", store, lower, upper, err)
	}
	return got
}

// Open opens dir with b, failing the test on error, and closes the database
// when the test ends if the test did not.
func Open(t testing.TB, b state.Backend, dir string) state.DB {
	t.Helper()
	db, err := b.Open(dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = db.Close() }) // fails with ErrClosed if the test closed it
	return db
}

func mustClose(t *testing.T, db state.DB) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func apply(t *testing.T, db state.DB, writes ...state.Write) {
	t.Helper()
	if err := db.Apply(&state.Batch{Writes: writes}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func put(store, key, value string) state.Write {
	return state.Write{Store: store, Key: []byte(key), Value: []byte(value)}
}

func del(store, key string) state.Write {
	return state.Write{Store: store, Key: []byte(key), Delete: true}
}

func wantGet(t *testing.T, db state.DB, store, key string, want string, wantOK bool) {
	t.Helper()
	v, ok, err := db.Get(store, []byte(key))
	if err != nil {
		t.Fatalf("Get(%q, %q): %v", store, key, err)
	}
	if ok != wantOK || string(v) != want {
		t.Fatalf("Get(%q, %q) = %q, %v; want %q, %v", store, key, v, ok, want, wantOK)
	}
}

func wantScan(t *testing.T, db state.DB, store string, lower, upper []byte, want []KV) {
	t.Helper()
	if got := Scan(t, db, store, lower, upper); !reflect.DeepEqual(got, want) {
		t.Fatalf("Scan(%q, %q, %q) = %q; want %q", store, lower, upper, got, want)
	}
}

func testGetPutDelete(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	wantGet(t, db, "s", "k", "", false)
	apply(t, db, put("s", "k", "v1"))
	wantGet(t, db, "s", "k", "v1", true)
	apply(t, db, put("s", "k", "v2"))
	wantGet(t, db, "s", "k", "v2", true)
	apply(t, db, del("s", "k"))
	wantGet(t, db, "s", "k", "", false)
	apply(t, db, del("s", "never-written"))
	// An empty value is a value, and an empty key is a key.
	apply(t, db, put("s", "empty", ""), put("s", "", "root"))
	wantGet(t, db, "s", "empty", "", true)
	wantGet(t, db, "s", "", "root", true)
	// Last write in a batch wins.
	apply(t, db, put("s", "twice", "a"), put("s", "twice", "b"), put("s", "gone", "x"), del("s", "gone"))
	wantGet(t, db, "s", "twice", "b", true)
	wantGet(t, db, "s", "gone", "", false)
}

func testGetReturnsCopy(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	w := put("s", "k", "value")
	apply(t, db, w)
	copy(w.Value, "XXXXX") // the DB must have copied at Apply
	v, _, err := db.Get("s", []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	copy(v, "YYYYY") // and the caller owns what Get returns
	wantGet(t, db, "s", "k", "value", true)
}

func testScan(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	apply(t, db, put("s", "d", "4"), put("s", "b", "2"), put("s", "a", "1"), put("s", "c", "3"))
	all := []KV{{"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", "4"}}
	for _, tt := range []struct {
		lower, upper []byte
		want         []KV
	}{
		{nil, nil, all},
		{[]byte("b"), []byte("d"), all[1:3]},
		{[]byte("b"), nil, all[1:]},
		{nil, []byte("c"), all[:2]},
		{[]byte("bb"), []byte("cc"), all[2:3]},
		{[]byte("c"), []byte("c"), nil},
		{[]byte("d"), []byte("a"), nil},
		{[]byte("e"), nil, nil},
		{[]byte{}, []byte("a"), nil},
	} {
		wantScan(t, db, "s", tt.lower, tt.upper, tt.want)
	}
	wantScan(t, db, "empty-store", nil, nil, nil)
}

func testScanStopsOnError(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	apply(t, db, put("s", "a", "1"), put("s", "b", "2"), put("s", "c", "3"))
	stop := errors.New("stop")
	n := 0
	err := db.Scan("s", nil, nil, func(k, v []byte) error {
		n++
		if string(k) == "b" {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("Scan returned %v; want the callback's error as is", err)
	}
	if n != 2 {
		t.Fatalf("callback ran %d times; want 2", n)
	}
}

func testScanCallsGet(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	apply(t, db, put("s", "a", "1"), put("s", "b", "2"), put("other", "zzzzzzzz", "x"))
	var got []KV
	err := db.Scan("s", []byte("a"), []byte("z"), func(k, v []byte) error {
		got = append(got, KV{string(k), string(v)})
		// A Get inside the scan must not disturb the scan's bounds.
		_, _, err := db.Get("other", []byte("zzzzzzzz"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []KV{{"a", "1"}, {"b", "2"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("scan = %q; want %q", got, want)
	}
}

// A backend may keep what it needs for scans between them (Pebble keeps its
// iterator); every scan must still see every Apply before it.
func testScanAfterApply(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	apply(t, db, put("s", "a", "1"), put("s", "c", "3"))
	wantScan(t, db, "s", nil, nil, []KV{{"a", "1"}, {"c", "3"}})
	wantScan(t, db, "s", []byte("b"), nil, []KV{{"c", "3"}})
	apply(t, db, put("s", "b", "2"), del("s", "c"))
	wantScan(t, db, "s", nil, nil, []KV{{"a", "1"}, {"b", "2"}})
	apply(t, db, put("t", "x", "9"))
	wantScan(t, db, "t", nil, nil, []KV{{"x", "9"}})
	wantScan(t, db, "s", []byte("a"), []byte("b"), []KV{{"a", "1"}})
}

// A database that applies in the background (state.BackgroundApplier)
// serves every read after ApplyInBackground as if Apply had returned: the
// caller's memory is its own again at once, writes come in any order (a
// write buffer's first-write order), and Close keeps the last batch.
func testApplyInBackground(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	bg, ok := db.(state.BackgroundApplier)
	if !ok {
		t.Skipf("%T applies in the foreground only", db)
	}
	var want []KV
	for round := range int64(5) {
		var writes []state.Write
		want = want[:0]
		for i := range 20 {
			k := fmt.Sprintf("k%02d", (i*7+int(round))%20) // unsorted
			v := fmt.Sprintf("v%d-%d", round, i)
			writes = append(writes, put("s", k, v))
			want = append(want, KV{k, v})
		}
		slices.SortFunc(want, func(a, b KV) int { return strings.Compare(a.Key, b.Key) })
		o := sampleOffsets()
		o.StreamTime = round
		if err := bg.ApplyInBackground(&state.Batch{Writes: writes, Offsets: o}); err != nil {
			t.Fatal(err)
		}
		for _, w := range writes {
			clear(w.Value) // the database copied the batch
		}
		wantScan(t, db, "s", nil, nil, want)
		wantGet(t, db, "s", want[3].Key, want[3].Value, true)
		wantOffsets(t, db, o)
	}
	if err := bg.ApplyInBackground(&state.Batch{Writes: []state.Write{put("s", "last", "1")}, Offsets: sampleOffsets()}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, db)
	db = Open(t, b, dir)
	defer mustClose(t, db)
	wantGet(t, db, "s", "last", "1", true)
	wantOffsets(t, db, sampleOffsets())
}

// A scan's callback may scan again (a session store looks up a session's
// value while it walks its index).
func testScanInScan(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	apply(t, db, put("s", "a", "1"), put("s", "b", "2"), put("t", "x", "8"), put("t", "y", "9"))
	var got []KV
	err := db.Scan("s", nil, nil, func(k, v []byte) error {
		got = append(got, KV{string(k), string(v)})
		return db.Scan("t", nil, nil, func(k, v []byte) error {
			got = append(got, KV{string(k), string(v)})
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []KV{{"a", "1"}, {"x", "8"}, {"y", "9"}, {"b", "2"}, {"x", "8"}, {"y", "9"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("scans = %q; want %q", got, want)
	}
	wantScan(t, db, "s", []byte("b"), nil, []KV{{"b", "2"}})
}

func testBinaryKeys(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	keys := []string{"", "\x00", "\x00\x00", "\x00\xff", "a", "a\x00", "a\x00b", "a\xff", "\xff", "\xff\x00", "\xff\xff"}
	var writes []state.Write
	var all []KV
	for i := len(keys) - 1; i >= 0; i-- {
		writes = append(writes, put("s", keys[i], fmt.Sprintf("v%d\x00\xff", i)))
	}
	for i, k := range keys {
		all = append(all, KV{k, fmt.Sprintf("v%d\x00\xff", i)})
	}
	apply(t, db, writes...)
	for _, kv := range all {
		wantGet(t, db, "s", kv.Key, kv.Value, true)
	}
	wantScan(t, db, "s", nil, nil, all)
	wantScan(t, db, "s", []byte("\x00"), []byte("a"), all[1:4])
	wantScan(t, db, "s", []byte("a\x00"), []byte("\xff"), all[5:8])
	wantScan(t, db, "s", []byte("\xff"), nil, all[8:])
	wantScan(t, db, "s", []byte("\xff\xff"), nil, all[10:])
	wantScan(t, db, "s", nil, []byte("\x00"), all[:1])
}

func testStoreIsolation(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	// Names that are prefixes of each other, or differ only after the
	// shorter one ends, are where a key layout leaks.
	stores := []string{"ab", "abc", "ab\x01", "ab\xff", "a", "b"}
	for i, s := range stores {
		apply(t, db, put(s, "k", s), put(s, fmt.Sprintf("only-%d", i), "x"), put(s, "\xff\xff", "end"))
	}
	for i, s := range stores {
		wantGet(t, db, s, "k", s, true)
		want := []KV{{"k", s}, {fmt.Sprintf("only-%d", i), "x"}, {"\xff\xff", "end"}}
		wantScan(t, db, s, nil, nil, want)
	}
	apply(t, db, del("ab", "k"))
	wantGet(t, db, "ab", "k", "", false)
	wantGet(t, db, "abc", "k", "abc", true)
}

func testInvalidStoreName(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	for _, name := range []string{"", "a\x00b", "\x00"} {
		err := db.Apply(&state.Batch{Writes: []state.Write{put(name, "k", "v")}})
		if !errors.Is(err, state.ErrInvalidStoreName) {
			t.Errorf("Apply to store %q: %v; want ErrInvalidStoreName", name, err)
		}
		if _, _, err := db.Get(name, []byte("k")); !errors.Is(err, state.ErrInvalidStoreName) {
			t.Errorf("Get from store %q: %v; want ErrInvalidStoreName", name, err)
		}
		err = db.Scan(name, nil, nil, func(k, v []byte) error { return nil })
		if !errors.Is(err, state.ErrInvalidStoreName) {
			t.Errorf("Scan of store %q: %v; want ErrInvalidStoreName", name, err)
		}
	}
}

func testOffsetsNew(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	o, err := db.Offsets()
	if err != nil {
		t.Fatal(err)
	}
	if o.Input == nil || o.Changelog == nil || len(o.Input) != 0 || len(o.Changelog) != 0 {
		t.Fatalf("offsets of a new database = %+v; want empty non-nil maps", o)
	}
	// Not zero: zero is a real time (the epoch), and a task restored from
	// a new database must not believe it has seen a record.
	if o.StreamTime != state.NoStreamTime {
		t.Fatalf("stream time of a new database = %d; want NoStreamTime", o.StreamTime)
	}
}

// sampleOffsets has several topics and partitions, topic names that need
// escaping in text formats, and the extremes of both integer types.
func sampleOffsets() state.Offsets {
	o := state.Offsets{
		Input: map[state.TopicPartition]int64{
			{Topic: "", Partition: -1}:                          -1,
			{Topic: "weird\x00topic\xff\n", Partition: 3}:       5,
			{Topic: "日本語", Partition: 1}:                        9,
			{Topic: strings.Repeat("long-", 60), Partition: 12}: 123456789,
			{Topic: "min", Partition: math.MinInt32}:            math.MinInt64,
			{Topic: "max", Partition: math.MaxInt32}:            math.MaxInt64,
		},
		Changelog:  map[string]int64{"counts": 17, "windows": 0, "sessions\xff": 1 << 40},
		StreamTime: 1_700_000_000_123,
	}
	for p := range int32(64) {
		o.Input[state.TopicPartition{Topic: "orders", Partition: p}] = int64(p) * 1000
		o.Input[state.TopicPartition{Topic: "app-counts-repartition", Partition: p}] = int64(p)
	}
	return o
}

func testOffsetsRoundTrip(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	want := sampleOffsets()
	if err := db.Apply(&state.Batch{Writes: []state.Write{put("counts", "k", "1")}, Offsets: want}); err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, db, want)

	// Offsets returns a copy: changing it changes nothing stored.
	got, _ := db.Offsets()
	got.Input[state.TopicPartition{Topic: "orders", Partition: 0}] = 999
	delete(got.Changelog, "counts")
	wantOffsets(t, db, want)

	// Each Apply replaces the offsets, even with none.
	next := state.Offsets{Input: map[state.TopicPartition]int64{{Topic: "orders", Partition: 1}: 2}}
	if err := db.Apply(&state.Batch{Offsets: next}); err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, db, next.Clone())
	if err := db.Apply(&state.Batch{}); err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, db, state.Offsets{}.Clone())
}

func testStreamTime(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	// The extremes, a negative time (before the epoch) and the epoch
	// itself, which must stay distinct from NoStreamTime.
	times := []int64{0, 1_700_000_000_123, -1, math.MaxInt64, state.NoStreamTime, 42}
	for _, ts := range times {
		o := state.NewOffsets()
		o.StreamTime = ts
		if err := db.Apply(&state.Batch{Offsets: o}); err != nil {
			t.Fatal(err)
		}
		wantOffsets(t, db, o)
		mustClose(t, db)
		db = Open(t, b, dir)
		wantOffsets(t, db, o)
	}
	// It travels with the writes, like the other offsets.
	o := sampleOffsets()
	o.StreamTime = 99
	if err := db.Apply(&state.Batch{Writes: []state.Write{put("s", "k", "v")}, Offsets: o}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, db)
	db = Open(t, b, dir)
	wantOffsets(t, db, o)
	wantGet(t, db, "s", "k", "v", true)
}

func wantOffsets(t *testing.T, db state.DB, want state.Offsets) {
	t.Helper()
	got, err := db.Offsets()
	if err != nil {
		t.Fatalf("Offsets: %v", err)
	}
	if got.Input == nil || got.Changelog == nil {
		t.Fatalf("Offsets = %+v; want non-nil maps", got)
	}
	if !maps.Equal(got.Input, want.Input) || !maps.Equal(got.Changelog, want.Changelog) || got.StreamTime != want.StreamTime {
		t.Fatalf("Offsets = %v; want %v", got, want)
	}
}

func testApplyAtomic(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	before := state.Offsets{Changelog: map[string]int64{"s": 1}}
	if err := db.Apply(&state.Batch{Writes: []state.Write{put("s", "a", "old")}, Offsets: before}); err != nil {
		t.Fatal(err)
	}
	// A batch that fails part way, on a write a backend cannot store,
	// must leave neither its earlier writes nor its offsets behind.
	bad := &state.Batch{
		Writes: []state.Write{
			put("s", "a", "new"),
			put("s", "b", "new"),
			put("bad\x00store", "c", "x"),
			del("s", "a"),
		},
		Offsets: sampleOffsets(),
	}
	if err := db.Apply(bad); err == nil {
		t.Fatal("Apply with an invalid store name succeeded")
	}
	wantGet(t, db, "s", "a", "old", true)
	wantGet(t, db, "s", "b", "", false)
	wantOffsets(t, db, before.Clone())
	if err := db.Apply(nil); err == nil {
		t.Fatal("Apply(nil) succeeded")
	}
}

func testLargeBatch(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	const n = 20000
	writes := make([]state.Write, 0, n+1)
	for i := range n {
		writes = append(writes, put("s", fmt.Sprintf("key-%08d", i), strings.Repeat("v", i%100)))
	}
	big := bytes.Repeat([]byte{0xab}, 4<<20) // larger than a small memtable
	writes = append(writes, state.Write{Store: "big", Key: []byte("k"), Value: big})
	apply(t, db, writes...)
	count := 0
	err := db.Scan("s", nil, nil, func(k, v []byte) error {
		if want := fmt.Sprintf("key-%08d", count); string(k) != want {
			return fmt.Errorf("key %d = %q; want %q", count, k, want)
		}
		count++
		return nil
	})
	if err != nil || count != n {
		t.Fatalf("scan: %d keys, %v; want %d", count, err, n)
	}
	v, ok, err := db.Get("big", []byte("k"))
	if err != nil || !ok || !bytes.Equal(v, big) {
		t.Fatalf("Get(big) = %d bytes, %v, %v", len(v), ok, err)
	}
}
