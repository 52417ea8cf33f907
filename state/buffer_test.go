package state_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/memory"
)

// KV is one key and value of a scan.
type KV struct{ Key, Value string }

func dbScan(t *testing.T, db state.DB, store string) []KV {
	t.Helper()
	var got []KV
	if err := db.Scan(store, nil, nil, func(k, v []byte) error {
		got = append(got, KV{string(k), string(v)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func fmtWrites(ws []state.Write) string {
	out := ""
	for _, w := range ws {
		out += fmt.Sprintf("{%s %q %q %v} ", w.Store, w.Key, w.Value, w.Delete)
	}
	return out
}

// op is one buffered write; an op with del set is a Delete.
type op struct {
	key, value string
	del        bool
}

func put(k, v string) op { return op{key: k, value: v} }
func del(k string) op    { return op{key: k, del: true} }

func (o op) do(s *state.StoreBuffer) {
	if o.del {
		s.Delete([]byte(o.key))
	} else {
		s.Put([]byte(o.key), []byte(o.value))
	}
}

// newDB opens a memory database holding seed in store "s".
func newDB(t testing.TB, seed ...KV) state.DB {
	t.Helper()
	db, err := memory.New().Open("task")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	var writes []state.Write
	for _, kv := range seed {
		writes = append(writes, state.Write{Store: "s", Key: []byte(kv.Key), Value: []byte(kv.Value)})
	}
	if err := db.Apply(&state.Batch{Writes: writes}); err != nil {
		t.Fatal(err)
	}
	return db
}

func scanAll(t *testing.T, s *state.StoreBuffer, lower, upper []byte) []KV {
	t.Helper()
	var got []KV
	if err := s.Scan(lower, upper, func(k, v []byte) error {
		got = append(got, KV{string(k), string(v)})
		return nil
	}); err != nil {
		t.Fatalf("Scan(%q, %q): %v", lower, upper, err)
	}
	return got
}

func TestStoreBufferGet(t *testing.T) {
	seed := []KV{{"a", "db-a"}, {"b", "db-b"}}
	type want struct {
		key, value string
		ok         bool
	}
	tests := []struct {
		name  string
		ops   []op
		dirty int
		want  []want
	}{
		{"db only", nil, 0, []want{{"a", "db-a", true}, {"x", "", false}}},
		{"put new key", []op{put("x", "1")}, 1, []want{{"x", "1", true}, {"a", "db-a", true}}},
		{"put overrides db", []op{put("a", "1")}, 1, []want{{"a", "1", true}, {"b", "db-b", true}}},
		{"last write wins", []op{put("a", "1"), put("a", "22"), put("a", "3")}, 1, []want{{"a", "3", true}}},
		{"delete hides db", []op{del("a")}, 1, []want{{"a", "", false}, {"b", "db-b", true}}},
		{"delete then put", []op{del("a"), put("a", "back")}, 1, []want{{"a", "back", true}}},
		{"put then delete", []op{put("x", "1"), del("x")}, 1, []want{{"x", "", false}}},
		{"delete absent key", []op{del("x")}, 1, []want{{"x", "", false}}},
		{"empty value", []op{put("a", "")}, 1, []want{{"a", "", true}}},
		{"empty key", []op{put("", "root")}, 1, []want{{"", "root", true}}},
		{"binary keys", []op{put("\x00", "zero"), put("\xff", "ff")}, 2, []want{{"\x00", "zero", true}, {"\xff", "ff", true}, {"\x00\x00", "", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := state.NewBuffer(newDB(t, seed...))
			s := b.Store("s")
			for _, o := range tt.ops {
				o.do(s)
			}
			if b.Len() != tt.dirty {
				t.Errorf("Len = %d; want %d", b.Len(), tt.dirty)
			}
			for _, w := range tt.want {
				v, ok, err := s.Get([]byte(w.key))
				if err != nil || ok != w.ok || string(v) != w.value {
					t.Errorf("Get(%q) = %q, %v, %v; want %q, %v", w.key, v, ok, err, w.value, w.ok)
				}
			}
		})
	}
}

func TestStoreBufferCopies(t *testing.T) {
	b := state.NewBuffer(nil)
	s := b.Store("s")
	key, value := []byte("k"), []byte("value")
	s.Put(key, value)
	copy(key, "x")
	copy(value, "XXXXX")
	if v, ok, _ := s.Get([]byte("k")); !ok || string(v) != "value" {
		t.Fatalf("Get = %q, %v; the buffer did not copy", v, ok)
	}
	// Appending to a returned slice must not write into the buffer.
	v, _, _ := s.Get([]byte("k"))
	_ = append(v, "-suffix"...)
	s.Put([]byte("k2"), []byte("other"))
	if v, _, _ := s.Get([]byte("k")); string(v) != "value" {
		t.Fatalf("Get = %q after appending to an earlier result", v)
	}
}

func TestBufferStoresIsolated(t *testing.T) {
	b := state.NewBuffer(newDB(t, KV{"k", "db"}))
	b.Store("s").Delete([]byte("k"))
	b.Store("t").Put([]byte("k"), []byte("t"))
	if b.Store("s") != b.Store("s") {
		t.Fatal("Store returned a new handle for a known store")
	}
	if _, ok, _ := b.Store("s").Get([]byte("k")); ok {
		t.Error("delete in s not visible")
	}
	if v, _, _ := b.Store("t").Get([]byte("k")); string(v) != "t" {
		t.Errorf("t/k = %q", v)
	}
	if _, ok, _ := b.Store("u").Get([]byte("k")); ok {
		t.Error("write to t leaked into u")
	}
	if b.Store("t").Name() != "t" {
		t.Errorf("Name = %q", b.Store("t").Name())
	}
}

func TestStoreBufferScan(t *testing.T) {
	seed := []KV{{"b", "db-b"}, {"d", "db-d"}, {"f", "db-f"}, {"h", "db-h"}}
	ops := []op{put("a", "1"), put("d", "2"), del("f"), put("g", "3"), del("x"), put("i", "4")}
	merged := []KV{{"a", "1"}, {"b", "db-b"}, {"d", "2"}, {"g", "3"}, {"h", "db-h"}, {"i", "4"}}
	tests := []struct {
		name         string
		seed         []KV
		ops          []op
		lower, upper string
		nilUpper     bool
		want         []KV
	}{
		{"interleaved, unbounded", seed, ops, "", "", true, merged},
		{"bounds", seed, ops, "b", "h", false, merged[1:4]},
		{"bounds between keys", seed, ops, "bb", "gg", false, merged[2:4]},
		{"lower on deleted key", seed, ops, "f", "", true, merged[3:]},
		{"upper on buffered key", seed, ops, "", "g", false, merged[:3]},
		{"empty range", seed, ops, "c", "c", false, nil},
		{"inverted range", seed, ops, "h", "b", false, nil},
		{"past the end", seed, ops, "j", "", true, nil},
		{"buffer only", nil, ops, "", "", true, []KV{{"a", "1"}, {"d", "2"}, {"g", "3"}, {"i", "4"}}},
		{"db only", seed, nil, "", "", true, seed},
		{"everything deleted", seed, []op{del("b"), del("d"), del("f"), del("h")}, "", "", true, nil},
		{"buffered unsorted", nil, []op{put("c", "3"), put("a", "1"), put("b", "2")}, "", "", true, []KV{{"a", "1"}, {"b", "2"}, {"c", "3"}}},
		{"binary keys", []KV{{"\x00", "db"}, {"\xff\xff", "db"}}, []op{put("", "e"), put("\xff", "ff"), del("\xff\xff")}, "", "", true, []KV{{"", "e"}, {"\x00", "db"}, {"\xff", "ff"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := state.NewBuffer(newDB(t, tt.seed...)).Store("s")
			for _, o := range tt.ops {
				o.do(s)
			}
			var upper []byte
			if !tt.nilUpper {
				upper = []byte(tt.upper)
			}
			if got := scanAll(t, s, []byte(tt.lower), upper); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Scan = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestStoreBufferPrefixScan(t *testing.T) {
	seed := []KV{{"ab", "db"}, {"abc", "db"}, {"b", "db"}, {"\xff", "db"}, {"\xff\xff", "db"}}
	s := state.NewBuffer(newDB(t, seed...)).Store("s")
	s.Put([]byte("a"), []byte("buf"))
	s.Delete([]byte("abc"))
	s.Put([]byte("abd"), []byte("buf"))
	s.Put([]byte("\xff\x00"), []byte("buf"))
	tests := []struct {
		prefix string
		want   []KV
	}{
		{"a", []KV{{"a", "buf"}, {"ab", "db"}, {"abd", "buf"}}},
		{"ab", []KV{{"ab", "db"}, {"abd", "buf"}}},
		{"abc", nil},
		{"\xff", []KV{{"\xff", "db"}, {"\xff\x00", "buf"}, {"\xff\xff", "db"}}},
		{"\xff\xff", []KV{{"\xff\xff", "db"}}},
		{"", []KV{{"a", "buf"}, {"ab", "db"}, {"abd", "buf"}, {"b", "db"}, {"\xff", "db"}, {"\xff\x00", "buf"}, {"\xff\xff", "db"}}},
	}
	for _, tt := range tests {
		var got []KV
		err := s.PrefixScan([]byte(tt.prefix), func(k, v []byte) error {
			got = append(got, KV{string(k), string(v)})
			return nil
		})
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("PrefixScan(%q) = %q, %v; want %q", tt.prefix, got, err, tt.want)
		}
	}
}

func TestStoreBufferScanStopsOnError(t *testing.T) {
	stop := errors.New("stop")
	for _, at := range []string{"a", "b", "c"} { // buffered, from the DB, buffered after the DB's last key
		s := state.NewBuffer(newDB(t, KV{"b", "db"})).Store("s")
		s.Put([]byte("a"), []byte("buf"))
		s.Put([]byte("c"), []byte("buf"))
		var seen []string
		err := s.Scan(nil, nil, func(k, v []byte) error {
			seen = append(seen, string(k))
			if string(k) == at {
				return stop
			}
			return nil
		})
		if err != stop {
			t.Errorf("stop at %q: Scan returned %v; want the callback's error as is", at, err)
		}
		if seen[len(seen)-1] != at {
			t.Errorf("stop at %q: scan went on to %q", at, seen)
		}
	}
}

func TestStoreBufferScanWhileWriting(t *testing.T) {
	b := state.NewBuffer(newDB(t, KV{"b", "db"}, KV{"d", "db"}))
	s := b.Store("s")
	s.Put([]byte("a"), []byte("1"))
	s.Put([]byte("c"), []byte("1"))
	var seen []string
	err := s.Scan(nil, nil, func(k, v []byte) error {
		seen = append(seen, string(k))
		// Writes during a scan, including new keys and a nested scan
		// that sorts the buffer, must neither break nor derail it.
		s.Put([]byte("0"+string(k)), []byte("new"))
		s.Put(k, []byte("changed"))
		return s.Scan(nil, nil, func(k, v []byte) error { return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c", "d"}; !reflect.DeepEqual(seen, want) {
		t.Fatalf("scan saw %q; want %q", seen, want)
	}
	// A Reset inside a scan is a caller bug; it must not panic.
	err = s.Scan(nil, nil, func(k, v []byte) error {
		b.Reset()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestBufferWrites(t *testing.T) {
	b := state.NewBuffer(nil)
	for _, name := range []string{"z", "a", "m"} {
		s := b.Store(name)
		s.Put([]byte("k2"), []byte(name+"2"))
		s.Delete([]byte("k3"))
		s.Put([]byte("k1"), []byte(name+"1"))
		s.Put([]byte("k2"), []byte(name+"2'"))
	}
	b.Store("clean") // a store without writes contributes nothing
	prefix := state.Write{Store: "already", Key: []byte("there")}
	got := b.Writes([]state.Write{prefix})
	var want []state.Write
	want = append(want, prefix)
	for _, name := range []string{"a", "m", "z"} {
		want = append(want,
			state.Write{Store: name, Key: []byte("k1"), Value: []byte(name + "1")},
			state.Write{Store: name, Key: []byte("k2"), Value: []byte(name + "2'")},
			state.Write{Store: name, Key: []byte("k3"), Delete: true},
		)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Writes =\n%s\nwant\n%s", fmtWrites(got), fmtWrites(want))
	}
	if b.Len() != 9 {
		t.Fatalf("Len = %d; want 9", b.Len())
	}
}

func TestBufferReset(t *testing.T) {
	b := state.NewBuffer(newDB(t, KV{"a", "db"}))
	s := b.Store("s")
	s.Put([]byte("a"), []byte("buf"))
	s.Put([]byte("b"), []byte("buf"))
	b.Reset()
	if b.Len() != 0 || len(b.Writes(nil)) != 0 {
		t.Fatalf("after Reset: Len %d, Writes %v", b.Len(), b.Writes(nil))
	}
	if v, ok, _ := s.Get([]byte("a")); string(v) != "db" || !ok {
		t.Fatalf("after Reset: a = %q, %v; want the DB's value", v, ok)
	}
	if _, ok, _ := s.Get([]byte("b")); ok {
		t.Fatal("after Reset: b still visible")
	}
	if got := scanAll(t, s, nil, nil); !reflect.DeepEqual(got, []KV{{"a", "db"}}) {
		t.Fatalf("after Reset: scan = %q", got)
	}
	// The handle still works, and a retained key becomes dirty again.
	s.Put([]byte("b"), []byte("again"))
	if got := b.Writes(nil); len(got) != 1 || string(got[0].Value) != "again" {
		t.Fatalf("after Reset and Put: Writes = %s", fmtWrites(got))
	}
}

// TestBufferApplyEqualsMergedView checks the commit path end to end: after
// Writes, DB.Apply and Reset, the DB alone shows what the buffer showed.
func TestBufferApplyEqualsMergedView(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	db := newDB(t)
	b := state.NewBuffer(db)
	stores := []string{"s", "t", "u"}
	var writes []state.Write
	for round := range 30 {
		for range rng.IntN(200) {
			s := b.Store(stores[rng.IntN(len(stores))])
			key := fmt.Appendf(nil, "k%03d", rng.IntN(100))
			if rng.IntN(4) == 0 {
				s.Delete(key)
			} else {
				s.Put(key, fmt.Appendf(nil, "r%d-%d", round, rng.IntN(1000)))
			}
		}
		merged := map[string][]KV{}
		for _, name := range stores {
			merged[name] = scanAll(t, b.Store(name), nil, nil)
		}
		writes = b.Writes(writes[:0])
		if len(writes) != b.Len() {
			t.Fatalf("round %d: %d writes; Len says %d", round, len(writes), b.Len())
		}
		if err := db.Apply(&state.Batch{Writes: writes}); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(3) == 0 {
			b.Reset()
		} else {
			// Sometimes skip Reset: the buffer over the updated DB
			// must still show the same view.
			for _, name := range stores {
				if got := scanAll(t, b.Store(name), nil, nil); !reflect.DeepEqual(got, merged[name]) {
					t.Fatalf("round %d, store %s: view changed after Apply", round, name)
				}
			}
			b.Reset()
		}
		for _, name := range stores {
			if got := dbScan(t, db, name); !reflect.DeepEqual(got, merged[name]) {
				t.Fatalf("round %d, store %s: DB =\n%q\nmerged view was\n%q", round, name, got, merged[name])
			}
		}
	}
}

func TestBufferDBErrors(t *testing.T) {
	db := newDB(t)
	s := state.NewBuffer(db).Store("s")
	s.Put([]byte("a"), []byte("buffered"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.Get([]byte("a")); err != nil || !ok || string(v) != "buffered" {
		t.Fatalf("buffered Get = %q, %v, %v; want no DB access", v, ok, err)
	}
	if _, _, err := s.Get([]byte("b")); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("Get: %v; want ErrClosed", err)
	}
	if err := s.Scan(nil, nil, func(k, v []byte) error { return nil }); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("Scan: %v; want ErrClosed", err)
	}
}

func TestStoreBufferAllocs(t *testing.T) {
	b := state.NewBuffer(newDB(t))
	s := b.Store("s")
	key, value := []byte("key-0001"), []byte("value-0001")
	s.Put(key, value)
	if n := testing.AllocsPerRun(100, func() {
		s.Put(key, value)
		_, _, _ = s.Get(key)
	}); n != 0 {
		t.Errorf("rewriting a buffered key: %v allocs; want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		b.Reset()
		s.Put(key, value)
		_, _, _ = s.Get(key)
		_ = b.Store("s")
	}); n != 0 {
		t.Errorf("writing a key of the previous transaction: %v allocs; want 0", n)
	}
}

func TestBufferRetentionLimit(t *testing.T) {
	b := state.NewBuffer(nil)
	s := b.Store("s")
	s.Put([]byte("small"), []byte("v"))
	b.Reset()
	if n := s.RetainedSlots(); n != 1 {
		t.Fatalf("%d slots kept below the limits; want 1", n)
	}
	for i := range state.MaxRetainedSlots + 1 {
		s.Put(fmt.Appendf(nil, "k%d", i), nil)
	}
	b.Reset()
	if n := s.RetainedSlots(); n != 0 {
		t.Fatalf("%d slots kept past the slot limit; want 0", n)
	}
	s.Put([]byte("big"), make([]byte, state.MaxRetainedBytes))
	b.Reset()
	if n := s.RetainedSlots(); n != 0 {
		t.Fatalf("%d slots kept past the byte limit; want 0", n)
	}
	// The buffer still behaves after forgetting.
	s.Put([]byte("k1"), []byte("v"))
	if v, ok, _ := s.Get([]byte("k1")); !ok || string(v) != "v" || b.Len() != 1 {
		t.Fatalf("after forgetting: Get = %q, %v; Len %d", v, ok, b.Len())
	}
}

// BenchmarkStoreBufferPutGet measures the per-record path: a Get and a Put of
// one key, with a Reset (a commit) every 10,000 records. The DB is empty, so
// the cost is the buffer's own.
func BenchmarkStoreBufferPutGet(b *testing.B) {
	for _, bc := range []struct {
		name string
		keys int
	}{
		{"hot-key", 1},
		{"1k-keys", 1000},
		{"1M-keys", 1 << 20}, // more distinct keys than slots kept: cold path
	} {
		b.Run(bc.name, func(b *testing.B) {
			keys := make([][]byte, bc.keys)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "user-%08d", i)
			}
			value := make([]byte, 64)
			buf := state.NewBuffer(newDB(b))
			s := buf.Store("counts")
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				key := keys[i%len(keys)]
				v, _, err := s.Get(key)
				if err != nil {
					b.Fatal(err)
				}
				value[0] = byte(len(v))
				s.Put(key, value)
				if i%10000 == 9999 {
					buf.Reset()
				}
			}
		})
	}
}

// countingDB counts the Gets that reach the database.
type countingDB struct {
	state.DB
	gets int
}

func (c *countingDB) Get(store string, key []byte) ([]byte, bool, error) {
	c.gets++
	return c.DB.Get(store, key)
}

// After Commit the buffer serves committed values (and misses) itself;
// after an aborted transaction the keys it wrote read from the DB again.
func TestBufferCachesCommittedValues(t *testing.T) {
	mem, err := memory.New().Open("task")
	if err != nil {
		t.Fatal(err)
	}
	db := &countingDB{DB: mem}
	b := state.NewBuffer(db)
	s := b.Store("s")
	s.Put([]byte("a"), []byte("1"))
	if err := db.Apply(&state.Batch{Writes: b.Writes(nil)}); err != nil {
		t.Fatal(err)
	}
	b.Commit()
	if v, ok, _ := s.Get([]byte("a")); !ok || string(v) != "1" || db.gets != 0 {
		t.Fatalf("committed value: got %q %v after %d DB gets, want \"1\" from the cache", v, ok, db.gets)
	}
	if _, ok, _ := s.Get([]byte("missing")); ok || db.gets != 1 {
		t.Fatalf("first miss: ok=%v gets=%d", ok, db.gets)
	}
	if _, ok, _ := s.Get([]byte("missing")); ok || db.gets != 1 {
		t.Fatalf("cached miss went to the DB: ok=%v gets=%d", ok, db.gets)
	}
	// An aborted overwrite: the committed value comes back from the DB.
	s.Put([]byte("a"), []byte("2"))
	s.Put([]byte("missing"), []byte("x"))
	b.Reset()
	if v, ok, _ := s.Get([]byte("a")); !ok || string(v) != "1" || db.gets != 2 {
		t.Fatalf("after abort: got %q %v with %d DB gets, want \"1\" read again from the DB", v, ok, db.gets)
	}
	if _, ok, _ := s.Get([]byte("missing")); ok {
		t.Fatal("an aborted put is visible after Reset")
	}
	// A committed delete is cached as a miss.
	s.Delete([]byte("a"))
	if err := db.Apply(&state.Batch{Writes: b.Writes(nil)}); err != nil {
		t.Fatal(err)
	}
	b.Commit()
	gets := db.gets
	if _, ok, _ := s.Get([]byte("a")); ok || db.gets != gets {
		t.Fatalf("committed delete: ok=%v, DB gets %d -> %d", ok, gets, db.gets)
	}
}
