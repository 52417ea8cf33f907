package state_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
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

// op is one buffered write; an op with del set is a Delete, one with rng set
// a DeleteRange over [key, value), or to the end when toEnd is set too.
type op struct {
	key, value string
	del, rng   bool
	toEnd      bool
}

func put(k, v string) op { return op{key: k, value: v} }
func del(k string) op    { return op{key: k, del: true} }

// delRange is DeleteRange(lower, upper); delFrom is DeleteRange(lower, nil).
func delRange(lower, upper string) op { return op{key: lower, value: upper, rng: true} }
func delFrom(lower string) op         { return op{key: lower, rng: true, toEnd: true} }

func (o op) do(s *state.StoreBuffer) {
	switch {
	case o.rng && o.toEnd:
		s.DeleteRange([]byte(o.key), nil)
	case o.rng:
		s.DeleteRange([]byte(o.key), []byte(o.value))
	case o.del:
		s.Delete([]byte(o.key))
	default:
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
			b := state.NewBuffer(newDB(t, seed...), nil)
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
	b := state.NewBuffer(nil, nil)
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
	b := state.NewBuffer(newDB(t, KV{"k", "db"}), nil)
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
			s := state.NewBuffer(newDB(t, tt.seed...), nil).Store("s")
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
	s := state.NewBuffer(newDB(t, seed...), nil).Store("s")
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
		s := state.NewBuffer(newDB(t, KV{"b", "db"}), nil).Store("s")
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
	b := state.NewBuffer(newDB(t, KV{"b", "db"}, KV{"d", "db"}), nil)
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
	db := newDB(t)
	var held []state.Write // k3 in every store, which the deletes below remove
	for _, name := range []string{"z", "a", "m"} {
		held = append(held, state.Write{Store: name, Key: []byte("k3"), Value: []byte("old")})
	}
	if err := db.Apply(&state.Batch{Writes: held}); err != nil {
		t.Fatal(err)
	}
	b := state.NewBuffer(db, nil)
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
		want = append(want, // in the order first written
			state.Write{Store: name, Key: []byte("k2"), Value: []byte(name + "2'")},
			state.Write{Store: name, Key: []byte("k3"), Delete: true},
			state.Write{Store: name, Key: []byte("k1"), Value: []byte(name + "1")},
		)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Writes =\n%s\nwant\n%s", fmtWrites(got), fmtWrites(want))
	}
	if b.Len() != 9 {
		t.Fatalf("Len = %d; want 9", b.Len())
	}
}

// A delete of a key the DB does not hold (a cached miss, or a key new to
// a store known whole) is left out of Writes, so a record stored and
// dropped in one transaction costs no changelog record; a delete of a key
// the DB holds, or may hold, is kept. A scan that deletes the key it is
// passed does so without a lookup, with the same result.
func TestBufferWritesLeaveOutDeletesOfAbsentKeys(t *testing.T) {
	db := &countingDB{DB: newDB(t, KV{"held", "db"})}
	b := state.NewBuffer(db, nil)
	seeded, fresh := b.Store("s"), b.Store("fresh")
	if _, ok, _ := seeded.Get([]byte("miss")); ok {
		t.Fatal("miss found")
	}
	seeded.Put([]byte("miss"), []byte("v")) // a cached miss, written then deleted
	seeded.Delete([]byte("miss"))
	seeded.Delete([]byte("held"))             // the DB holds it
	seeded.Put([]byte("unread"), []byte("v")) // never read: the DB may hold it
	seeded.Delete([]byte("unread"))
	for _, k := range []string{"a", "b", "c", "d"} {
		fresh.Put([]byte(k), []byte("v"))
	}
	fresh.Delete([]byte("a"))
	err := fresh.Scan([]byte("b"), []byte("d"), func(k, _ []byte) error {
		fresh.Delete(k) // consumes b and c
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := fmtWrites(b.Writes(nil))
	want := fmtWrites([]state.Write{{Store: "fresh", Key: []byte("d"), Value: []byte("v")},
		{Store: "s", Key: []byte("held"), Delete: true}, {Store: "s", Key: []byte("unread"), Delete: true}})
	if got != want {
		t.Fatalf("Writes =\n%s\nwant\n%s", got, want)
	}
	for _, k := range []string{"a", "b", "c"} {
		if _, ok, _ := fresh.Get([]byte(k)); ok {
			t.Fatalf("%s found after its delete", k)
		}
	}
	if err := db.Apply(&state.Batch{Writes: b.Writes(nil)}); err != nil {
		t.Fatal(err)
	}
	b.Commit()
	// Committed, the fresh keys are cached misses, and d is held: its
	// delete is kept, a put and delete of b again left out.
	gets := db.gets
	fresh.Put([]byte("b"), []byte("again"))
	fresh.Delete([]byte("b"))
	fresh.Delete([]byte("d"))
	if got, want := fmtWrites(b.Writes(nil)), fmtWrites([]state.Write{{Store: "fresh", Key: []byte("d"), Delete: true}}); got != want {
		t.Fatalf("second transaction: Writes =\n%s\nwant\n%s", got, want)
	}
	if db.gets != gets {
		t.Fatalf("%d DB reads for writes to a store known whole", db.gets-gets)
	}
	if got := dbScan(t, db, "s"); !reflect.DeepEqual(got, []KV(nil)) {
		t.Fatalf("DB store s = %q; want nothing", got)
	}
}

func TestBufferReset(t *testing.T) {
	b := state.NewBuffer(newDB(t, KV{"a", "db"}), nil)
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
	b := state.NewBuffer(db, nil)
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
		if len(writes) > b.Len() { // Len bounds them: deletes of absent keys are left out
			t.Fatalf("round %d: %d writes; Len says at most %d", round, len(writes), b.Len())
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
	db := newDB(t, KV{"z", "db"}) // not empty: reads of unknown keys go to the DB
	s := state.NewBuffer(db, nil).Store("s")
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
	b := state.NewBuffer(newDB(t), nil)
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

// commitWrites puts keys in one transaction of b, applies them to db as the
// runtime does and commits the buffer.
func commitWrites(t *testing.T, b *state.Buffer, db state.DB, s *state.StoreBuffer, keys ...string) {
	t.Helper()
	for _, k := range keys {
		s.Put([]byte(k), []byte("value-of-"+k))
	}
	if err := db.Apply(&state.Batch{Writes: b.Writes(nil)}); err != nil {
		t.Fatal(err)
	}
	b.Commit()
}

// The caches stay within their budget while the state grows far past it;
// a key used in every transaction stays cached while cold keys stream
// through; an evicted key reads its committed value from the DB again.
func TestBufferCacheBudget(t *testing.T) {
	mem, err := memory.New().Open("task")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	db := &countingDB{DB: mem}
	const limit = 64 << 10
	budget := state.NewCacheBudget(limit)
	b := state.NewBuffer(db, budget)
	s := b.Store("s")
	commitWrites(t, b, db, s, "hot")
	for tx := range 500 { // 10,000 keys of ~130 bytes each: 20 times the budget
		if _, ok, err := s.Get([]byte("hot")); !ok || err != nil {
			t.Fatalf("transaction %d: hot key: %v %v", tx, ok, err)
		}
		var keys []string
		for i := range 20 {
			keys = append(keys, fmt.Sprintf("cold-%05d", tx*20+i))
		}
		commitWrites(t, b, db, s, keys...)
		if st := budget.Stats(); st.Used > limit || st.Used <= 0 {
			t.Fatalf("after transaction %d: %d bytes used of %d", tx, st.Used, limit)
		}
	}
	if db.gets != 0 {
		t.Fatalf("%d Gets reached the DB; the hot key should have stayed cached", db.gets)
	}
	st := budget.Stats()
	if st.Evictions < 9000 || st.Hits != 500 || st.Misses != 0 {
		t.Fatalf("stats %+v: want ≥ 9000 evictions, 500 hits, no misses", st)
	}
	if n := s.RetainedSlots(); n > 10_001 {
		t.Fatalf("%d slots: freed slots must be reused", n)
	}
	// An evicted key is read from the DB, with its committed value.
	if v, ok, err := s.Get([]byte("cold-00000")); !ok || err != nil || string(v) != "value-of-cold-00000" || db.gets != 1 {
		t.Fatalf("evicted key: %q %v %v after %d DB gets", v, ok, err, db.gets)
	}
	b.Close()
	if used := budget.Stats().Used; used != 0 {
		t.Fatalf("after Close: %d bytes used; want 0", used)
	}
}

// A store that was empty when the buffer first used it is known whole:
// reads of keys the buffer has no slot for need no DB read, until a key
// the DB holds is evicted. A store that held keys is read from the DB.
func TestBufferCompleteStore(t *testing.T) {
	db := &countingDB{DB: newDB(t, KV{"old", "db"})}
	budget := state.NewCacheBudget(16 << 10)
	b := state.NewBuffer(db, budget)
	fresh, seeded := b.Store("fresh"), b.Store("s")
	if _, ok, _ := seeded.Get([]byte("new")); ok || db.gets != 1 {
		t.Fatalf("store with keys: Get of an unknown key found %v after %d DB gets; want a DB read", ok, db.gets)
	}
	if v, ok, _ := seeded.Get([]byte("old")); !ok || string(v) != "db" {
		t.Fatalf("store with keys: Get(old) = %q, %v", v, ok)
	}
	db.gets = 0
	for tx := range 50 {
		for i := range 10 {
			k := fmt.Sprintf("k-%04d", tx*10+i)
			if _, ok, _ := fresh.Get([]byte(k)); ok {
				t.Fatalf("%s found before it was written", k)
			}
			fresh.Put([]byte(k), []byte("v"))
		}
		if err := db.Apply(&state.Batch{Writes: b.Writes(nil)}); err != nil {
			t.Fatal(err)
		}
		b.Commit()
		if budget.Stats().Evictions > 0 {
			break
		}
		if db.gets != 0 {
			t.Fatalf("transaction %d: %d DB gets for keys of a store the buffer knows whole", tx, db.gets)
		}
	}
	if budget.Stats().Evictions == 0 {
		t.Fatal("no eviction: the budget is too large for the test")
	}
	// Some keys were evicted: an unknown key may be in the DB now.
	if v, ok, _ := fresh.Get([]byte("k-0000")); !ok || string(v) != "v" || db.gets != 1 {
		t.Fatalf("evicted key: %q, %v after %d DB gets; want its value from the DB", v, ok, db.gets)
	}
	if _, ok, _ := fresh.Get([]byte("never")); ok || db.gets != 2 {
		t.Fatalf("unknown key after evictions: found %v after %d DB gets; want a DB read", ok, db.gets)
	}
}

// Buffers sharing a budget stay within it together, and one transaction
// larger than the budget is kept whole until it ends.
func TestBufferCacheBudgetShared(t *testing.T) {
	const limit = 32 << 10
	budget := state.NewCacheBudget(limit)
	dbs := []state.DB{newDB(t), newDB(t)}
	bufs := []*state.Buffer{state.NewBuffer(dbs[0], budget), state.NewBuffer(dbs[1], budget)}
	var big []string
	for i := range 2000 { // ~250 KB: 8 times the budget
		big = append(big, fmt.Sprintf("big-%05d", i))
	}
	s := bufs[0].Store("s")
	for _, k := range big {
		s.Put([]byte(k), []byte("value-of-"+k))
	}
	for _, k := range big {
		if v, ok, _ := s.Get([]byte(k)); !ok || string(v) != "value-of-"+k {
			t.Fatalf("a write of the open transaction was lost: %s = %q %v", k, v, ok)
		}
	}
	commitWrites(t, bufs[0], dbs[0], s)
	if used := budget.Stats().Used; used > limit {
		t.Fatalf("after the big transaction: %d bytes used of %d", used, limit)
	}
	for tx := range 200 {
		for j, b := range bufs {
			commitWrites(t, b, dbs[j], b.Store("s"), fmt.Sprintf("k-%05d-a", tx), fmt.Sprintf("k-%05d-b", tx))
			if used := budget.Stats().Used; used > limit {
				t.Fatalf("transaction %d of buffer %d: %d bytes used of %d", tx, j, used, limit)
			}
		}
	}
	for _, b := range bufs {
		b.Close()
	}
	if used := budget.Stats().Used; used != 0 {
		t.Fatalf("after Close: %d bytes used; want 0", used)
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
		{"1M-keys", 1 << 20}, // more keys than the default budget holds: evictions and DB reads
	} {
		b.Run(bc.name, func(b *testing.B) {
			keys := make([][]byte, bc.keys)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "user-%08d", i)
			}
			value := make([]byte, 64)
			buf := state.NewBuffer(newDB(b), nil)
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
	// Not empty, so that a key the buffer does not know is read from it.
	db := &countingDB{DB: newDB(t, KV{"z", "db"})}
	b := state.NewBuffer(db, nil)
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

func fmtRanges(rs []state.DeleteRange) string {
	out := ""
	for _, r := range rs {
		upper := "<end>"
		if r.Upper != nil {
			upper = fmt.Sprintf("%q", r.Upper)
		}
		out += fmt.Sprintf("{%s %q %s} ", r.Store, r.Lower, upper)
	}
	return out
}

// rangeSeed is the DB content of store "s" that the range tests start from,
// with binary keys at both ends of the key space.
var rangeSeed = []KV{{"", "db"}, {"\x00", "db"}, {"a", "db"}, {"b", "db"}, {"b\x00", "db"}, {"c", "db"}, {"d", "db"}, {"\xff", "db"}, {"\xff\xff", "db"}}

// seedWithout returns rangeSeed minus the given keys, with the given extra
// key-value pairs replacing or adding to it, sorted.
func seedWithout(drop []string, extra ...KV) []KV {
	var out []KV
	for _, kv := range rangeSeed {
		replaced := slices.ContainsFunc(extra, func(e KV) bool { return e.Key == kv.Key })
		if !replaced && !slices.Contains(drop, kv.Key) {
			out = append(out, kv)
		}
	}
	out = append(out, extra...)
	slices.SortFunc(out, func(a, b KV) int { return strings.Compare(a.Key, b.Key) })
	return out
}

var rangeCases = []struct {
	name   string
	ops    []op
	view   []KV   // the merged view after ops
	writes string // fmtWrites of Writes
	ranges string // fmtRanges of Ranges
}{
	{
		"hides the DB's keys", []op{delRange("b", "d")},
		seedWithout([]string{"b", "b\x00", "c"}), "", `{s "b" "d"} `,
	},
	{
		"upper is exclusive", []op{delRange("b", "b\x00")},
		seedWithout([]string{"b"}), "", `{s "b" "b\x00"} `,
	},
	{
		"nil upper is the end", []op{delFrom("c")},
		seedWithout([]string{"c", "d", "\xff", "\xff\xff"}), "", `{s "c" <end>} `,
	},
	{
		"empty upper is the end", []op{delRange("c", "")},
		seedWithout([]string{"c", "d", "\xff", "\xff\xff"}), "", `{s "c" <end>} `,
	},
	{
		"whole store", []op{delFrom("")},
		nil, "", `{s "" <end>} `,
	},
	{
		"empty range", []op{put("c", "buf"), delRange("c", "c")},
		seedWithout([]string{"c"}, KV{"c", "buf"}), `{s "c" "buf" false} `, "",
	},
	{
		"inverted range", []op{put("c", "buf"), delRange("d", "b")},
		seedWithout([]string{"c"}, KV{"c", "buf"}), `{s "c" "buf" false} `, "",
	},
	{
		"discards earlier writes",
		[]op{put("b", "buf"), put("x", "buf"), del("c"), put("a", "buf"), put("aa", "buf"), delRange("a", "c\x00")},
		seedWithout([]string{"a", "b", "b\x00", "c"}, KV{"x", "buf"}), `{s "x" "buf" false} `, `{s "a" "c\x00"} `,
	},
	{
		"writes after the range are seen",
		[]op{delFrom("a"), put("b", "new"), del("c"), put("zz", "new")},
		[]KV{{"", "db"}, {"\x00", "db"}, {"b", "new"}, {"zz", "new"}},
		`{s "b" "new" false} {s "c" "" true} {s "zz" "new" false} `, `{s "a" <end>} `,
	},
	{
		"write between overlapping ranges",
		[]op{delRange("a", "c"), put("b", "new"), delRange("b\x00", "d")},
		seedWithout([]string{"a", "b", "b\x00", "c"}, KV{"b", "new"}), `{s "b" "new" false} `, `{s "a" "c"} {s "b\x00" "d"} `,
	},
	{
		"a contained range hides a write again",
		[]op{delRange("a", "z"), put("b", "new"), put("c", "new"), delRange("b", "c")},
		seedWithout([]string{"a", "b", "b\x00", "d"}, KV{"c", "new"}), `{s "c" "new" false} `, `{s "a" "z"} `,
	},
	{
		"the same range twice",
		[]op{delFrom("c"), put("d", "new"), delFrom("c")},
		seedWithout([]string{"c", "d", "\xff", "\xff\xff"}), "", `{s "c" <end>} `,
	},
	{
		"touching ranges", []op{delRange("a", "b"), delRange("b", "c")},
		seedWithout([]string{"a", "b", "b\x00"}), "", `{s "a" "b"} {s "b" "c"} `,
	},
	{
		"ranges out of order", []op{delRange("d", "\xff"), delRange("\x00", "b")},
		seedWithout([]string{"\x00", "a", "d"}), "", `{s "d" "\xff"} {s "\x00" "b"} `,
	},
	{
		"a range spanning earlier ones",
		[]op{delRange("a", "b"), delRange("c", "d"), delRange("\x00", "\xff")},
		seedWithout([]string{"\x00", "a", "b", "b\x00", "c", "d"}), "", `{s "a" "b"} {s "c" "d"} {s "\x00" "\xff"} `,
	},
	{
		"a range extending an earlier one",
		[]op{delRange("b", "c"), put("c", "new"), delFrom("b\x00")},
		seedWithout([]string{"b", "b\x00", "c", "d", "\xff", "\xff\xff"}), "", `{s "b" "c"} {s "b\x00" <end>} `,
	},
}

// checkView checks every read path of s against want, the expected merged
// view: Scan of everything and of a sub-range, PrefixScan, and Get of every
// key in want, in rangeSeed and in probes.
func checkView(t *testing.T, s *state.StoreBuffer, want []KV, probes ...string) {
	t.Helper()
	if got := scanAll(t, s, nil, nil); !reflect.DeepEqual(got, want) {
		t.Errorf("Scan = %q; want %q", got, want)
	}
	var sub, prefixed []KV
	for _, kv := range want {
		if kv.Key >= "a\x00" && kv.Key < "c\x00" {
			sub = append(sub, kv)
		}
		if strings.HasPrefix(kv.Key, "b") {
			prefixed = append(prefixed, kv)
		}
	}
	if got := scanAll(t, s, []byte("a\x00"), []byte("c\x00")); !reflect.DeepEqual(got, sub) {
		t.Errorf("Scan(a\\x00, c\\x00) = %q; want %q", got, sub)
	}
	var got []KV
	if err := s.PrefixScan([]byte("b"), func(k, v []byte) error {
		got = append(got, KV{string(k), string(v)})
		return nil
	}); err != nil || !reflect.DeepEqual(got, prefixed) {
		t.Errorf("PrefixScan(b) = %q, %v; want %q", got, err, prefixed)
	}
	keys := slices.Clone(probes)
	for _, kv := range append(slices.Clone(want), rangeSeed...) {
		keys = append(keys, kv.Key)
	}
	for _, k := range keys {
		i := slices.IndexFunc(want, func(kv KV) bool { return kv.Key == k })
		v, ok, err := s.Get([]byte(k))
		if err != nil || ok != (i >= 0) || i >= 0 && string(v) != want[i].Value {
			t.Errorf("Get(%q) = %q, %v, %v; want found %v", k, v, ok, err, i >= 0)
		}
	}
}

// warm reads every seed key, so that the buffer caches them as clean slots:
// the range tests run cold and warm, since a range must hide cached values
// as well as the DB's.
func warm(t *testing.T, s *state.StoreBuffer) {
	t.Helper()
	for _, kv := range rangeSeed {
		if _, _, err := s.Get([]byte(kv.Key)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStoreBufferDeleteRange(t *testing.T) {
	for _, tt := range rangeCases {
		for _, cached := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/cached=%v", tt.name, cached), func(t *testing.T) {
				b := state.NewBuffer(newDB(t, rangeSeed...), nil)
				s := b.Store("s")
				other := b.Store("t")
				other.Put([]byte("b"), []byte("t")) // another store's write in the range
				if cached {
					warm(t, s)
				}
				for _, o := range tt.ops {
					o.do(s)
				}
				checkView(t, s, tt.view, "aa", "x", "zz")
				writes := b.Writes(nil)
				var ws []state.Write
				for _, w := range writes {
					if w.Store == "s" {
						ws = append(ws, w)
					}
				}
				if got := fmtWrites(ws); got != tt.writes {
					t.Errorf("Writes = %s; want %s", got, tt.writes)
				}
				if b.Len() != len(writes) {
					t.Errorf("Len = %d; Writes has %d", b.Len(), len(writes))
				}
				if got := fmtRanges(b.Ranges(nil)); got != tt.ranges {
					t.Errorf("Ranges = %s; want %s", got, tt.ranges)
				}
				if v, ok, _ := other.Get([]byte("b")); !ok || string(v) != "t" {
					t.Errorf("store t: b = %q, %v; a range of store s reached it", v, ok)
				}
			})
		}
	}
}

// TestBufferDeleteRangeCommit applies each case as the runtime does, in one
// Batch of Ranges and Writes, then commits: the buffer's reads must then
// agree with the DB's, cached keys included, and the next transaction starts
// with no pending range.
func TestBufferDeleteRangeCommit(t *testing.T) {
	for _, tt := range rangeCases {
		for _, cached := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/cached=%v", tt.name, cached), func(t *testing.T) {
				mem := newDB(t, rangeSeed...)
				db := &countingDB{DB: mem}
				b := state.NewBuffer(db, nil)
				s := b.Store("s")
				if cached {
					warm(t, s)
				}
				for _, o := range tt.ops {
					o.do(s)
				}
				batch := &state.Batch{Ranges: b.Ranges(nil), Writes: b.Writes(nil)}
				if err := db.Apply(batch); err != nil {
					t.Fatal(err)
				}
				b.Commit()
				if got := dbScan(t, mem, "s"); !reflect.DeepEqual(got, tt.view) {
					t.Fatalf("DB after commit = %q; want the view before it, %q", got, tt.view)
				}
				gets := db.gets
				for _, kv := range rangeSeed {
					if _, _, err := s.Get([]byte(kv.Key)); err != nil {
						t.Fatal(err)
					}
				}
				// Keys the buffer cached before stay cached: a committed
				// range turns them into cached misses.
				if cached && db.gets != gets {
					t.Errorf("%d DB gets for keys cached before the commit; want 0", db.gets-gets)
				}
				checkView(t, s, tt.view, "aa", "x", "zz")
				if rs := b.Ranges(nil); len(rs) != 0 || b.Len() != 0 {
					t.Fatalf("after Commit: Ranges = %s, Len %d; want none", fmtRanges(rs), b.Len())
				}
				// The next transaction writes into the dropped range.
				s.Put([]byte("b"), []byte("next"))
				want := slices.DeleteFunc(slices.Clone(tt.view), func(kv KV) bool { return kv.Key == "b" })
				want = append(want, KV{"b", "next"})
				slices.SortFunc(want, func(a, b KV) int { return strings.Compare(a.Key, b.Key) })
				checkView(t, s, want)
			})
		}
	}
}

// TestBufferDeleteRangeReset aborts each case: the buffer must read the DB
// again, which the ranges never reached.
func TestBufferDeleteRangeReset(t *testing.T) {
	for _, tt := range rangeCases {
		for _, cached := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/cached=%v", tt.name, cached), func(t *testing.T) {
				db := newDB(t, rangeSeed...)
				b := state.NewBuffer(db, nil)
				s := b.Store("s")
				if cached {
					warm(t, s)
				}
				for _, o := range tt.ops {
					o.do(s)
				}
				b.Reset()
				if rs, ws := b.Ranges(nil), b.Writes(nil); len(rs) != 0 || len(ws) != 0 {
					t.Fatalf("after Reset: Ranges = %s, Writes = %s; want none", fmtRanges(rs), fmtWrites(ws))
				}
				checkView(t, s, rangeSeed, "aa", "x", "zz")
				if got := dbScan(t, db, "s"); !reflect.DeepEqual(got, rangeSeed) {
					t.Fatalf("DB changed without an Apply: %q", got)
				}
			})
		}
	}
}

func TestBufferRanges(t *testing.T) {
	b := state.NewBuffer(nil, nil)
	for _, name := range []string{"z", "a", "m"} {
		s := b.Store(name)
		s.DeleteRange([]byte("k5"), nil)
		s.DeleteRange([]byte("k1"), []byte("k2"))
	}
	b.Store("clean") // a store without ranges contributes nothing
	prefix := state.DeleteRange{Store: "already"}
	got := b.Ranges([]state.DeleteRange{prefix})
	want := []state.DeleteRange{prefix}
	for _, name := range []string{"a", "m", "z"} {
		want = append(want,
			state.DeleteRange{Store: name, Lower: []byte("k5")},
			state.DeleteRange{Store: name, Lower: []byte("k1"), Upper: []byte("k2")},
		)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Ranges =\n%s\nwant\n%s", fmtRanges(got), fmtRanges(want))
	}
	// The bounds are copies: changing the caller's slices changes nothing.
	lower, upper := []byte("b1"), []byte("b2")
	b.Store("a").DeleteRange(lower, upper)
	copy(lower, "yy")
	copy(upper, "yy")
	if got := b.Ranges(nil); len(got) != 7 || string(got[2].Lower) != "b1" || string(got[2].Upper) != "b2" {
		t.Fatalf("Ranges = %s; the buffer did not copy the bounds", fmtRanges(got))
	}
	b.Commit()
	if got := b.Ranges(nil); len(got) != 0 {
		t.Fatalf("Ranges after Commit = %s; want none", fmtRanges(got))
	}
}

// TestStoreBufferDeleteRangeInScan deletes ranges from inside a Scan's
// callback: the keys the scan has not reached yet are hidden, on both the
// buffered and the DB side.
func TestStoreBufferDeleteRangeInScan(t *testing.T) {
	b := state.NewBuffer(newDB(t, KV{"a", "db"}, KV{"c", "db"}, KV{"e", "db"}, KV{"g", "db"}), nil)
	s := b.Store("s")
	s.Put([]byte("b"), []byte("buf"))
	s.Put([]byte("d"), []byte("buf"))
	s.Put([]byte("f"), []byte("buf"))
	var seen []string
	err := s.Scan(nil, nil, func(k, v []byte) error {
		seen = append(seen, string(k))
		switch string(k) {
		case "a":
			s.DeleteRange([]byte("c"), []byte("e")) // c from the DB, d buffered
		case "b":
			s.DeleteRange([]byte("f"), nil) // f buffered, g from the DB
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "e"}; !reflect.DeepEqual(seen, want) {
		t.Fatalf("scan saw %q; want %q", seen, want)
	}
	if got := b.Writes(nil); fmtWrites(got) != `{s "b" "buf" false} ` {
		t.Fatalf("Writes = %s; want only b", fmtWrites(got))
	}
}

// TestStoreBufferDeleteRangeSkipsDB checks that reads do not go to the DB for
// what a pending range hides: a Get of a covered key, and a Scan over the
// covered part of the store (the expired segment's keys are still in the DB
// until the commit).
func TestStoreBufferDeleteRangeSkipsDB(t *testing.T) {
	var seed []KV
	for i := range 100 {
		seed = append(seed, KV{fmt.Sprintf("seg-%d/%02d", i/10, i), "v"})
	}
	db := &scanCountingDB{countingDB: countingDB{DB: newDB(t, seed...)}}
	s := state.NewBuffer(db, nil).Store("s")
	db.visited = 0 // the buffer's look at whether the store is empty
	s.DeleteRange([]byte("seg-0/"), []byte("seg-8/"))
	if _, ok, _ := s.Get([]byte("seg-3/30")); ok || db.gets != 0 {
		t.Fatalf("Get of a covered key: found %v after %d DB gets; want a miss without the DB", ok, db.gets)
	}
	if got := scanAll(t, s, nil, nil); len(got) != 20 || got[0].Key != "seg-8/80" {
		t.Fatalf("Scan = %d keys from %v; want the 20 of seg-8 and seg-9", len(got), got[0])
	}
	if db.visited != 20 {
		t.Fatalf("the scan read %d keys from the DB; want only the 20 outside the range", db.visited)
	}
}

// scanCountingDB also counts the keys that scans of the DB visit.
type scanCountingDB struct {
	countingDB
	visited int
}

func (c *scanCountingDB) Scan(store string, lower, upper []byte, fn func(key, value []byte) error) error {
	return c.DB.Scan(store, lower, upper, func(k, v []byte) error {
		c.visited++
		return fn(k, v)
	})
}

// TestBufferDeleteRangeModel runs random transactions of puts, deletes and
// range deletes against a model (a map per transaction), committing as the
// runtime does or aborting, and compares every read, the Writes (which
// must hold the keys written since the last range over them, except that a
// delete of a key the DB does not hold may be left out) and the DB after
// each commit.
func TestBufferDeleteRangeModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	db := newDB(t)
	b := state.NewBuffer(db, nil)
	s := b.Store("s")
	key := func() string { return fmt.Sprintf("k%02d", rng.IntN(40)) }
	committed := map[string]string{}
	for round := range 300 {
		view := maps.Clone(committed)
		dirty := map[string]bool{}
		for range rng.IntN(30) {
			switch k := key(); rng.IntN(6) {
			case 0, 1:
				v := fmt.Sprintf("r%d-%d", round, rng.IntN(1000))
				s.Put([]byte(k), []byte(v))
				view[k], dirty[k] = v, true
			case 2:
				s.Delete([]byte(k))
				delete(view, k)
				dirty[k] = true
			case 3:
				var upper []byte
				if rng.IntN(4) != 0 {
					upper = []byte(key())
				}
				s.DeleteRange([]byte(k), upper)
				for m := range view {
					if m >= k && (upper == nil || m < string(upper)) {
						delete(view, m)
					}
				}
				for m := range dirty {
					if m >= k && (upper == nil || m < string(upper)) {
						delete(dirty, m)
					}
				}
			default:
				v, ok, err := s.Get([]byte(k))
				if want, wantOK := view[k]; err != nil || ok != wantOK || string(v) != want {
					t.Fatalf("round %d: Get(%s) = %q, %v, %v; want %q, %v", round, k, v, ok, err, want, wantOK)
				}
			}
		}
		lower, upper := key(), key()
		var want []KV
		for k, v := range view {
			if k >= lower && k < upper {
				want = append(want, KV{k, v})
			}
		}
		slices.SortFunc(want, func(a, b KV) int { return strings.Compare(a.Key, b.Key) })
		if got := scanAll(t, s, []byte(lower), []byte(upper)); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: Scan(%s, %s) = %q; want %q", round, lower, upper, got, want)
		}
		writes := b.Writes(nil)
		var written []string
		for _, w := range writes {
			written = append(written, string(w.Key))
		}
		slices.Sort(written) // they come in the order first written
		// A delete of a key the DB does not hold may be left out (it
		// changes nothing); every other dirty key must be there.
		for _, k := range written {
			if !dirty[k] {
				t.Fatalf("round %d: Writes hold %q, not written since the last range over it", round, k)
			}
		}
		for k := range dirty {
			_, put := view[k]
			_, held := committed[k]
			if (put || held) && !slices.Contains(written, k) {
				t.Fatalf("round %d: Writes hold %q; want %q among them", round, written, k)
			}
		}
		if rng.IntN(4) == 0 {
			b.Reset()
			continue
		}
		if err := db.Apply(&state.Batch{Ranges: b.Ranges(nil), Writes: writes}); err != nil {
			t.Fatal(err)
		}
		b.Commit()
		committed = view
		var all []KV
		for _, k := range slices.Sorted(maps.Keys(committed)) {
			all = append(all, KV{k, committed[k]})
		}
		if got := dbScan(t, db, "s"); !reflect.DeepEqual(got, all) {
			t.Fatalf("round %d: DB = %q; want %q", round, got, all)
		}
	}
}

func TestStoreBufferDeleteRangeAllocs(t *testing.T) {
	b := state.NewBuffer(newDB(t, KV{"a", "db"}, KV{"z", "db"}), nil)
	s := b.Store("s")
	hot, cold := b.Store("hot"), b.Store("cold")
	key, value := []byte("key-0001"), []byte("value-0001")
	// The keys exist before the measure: a key passed to Get escapes, so a
	// conversion inside the function would count as the buffer's.
	ka, kz, kn, kb := []byte("a"), []byte("z"), []byte("n"), []byte("b")
	hot.Put(key, value)
	_, _, _ = s.Get([]byte("a"))
	_, _, _ = s.Get([]byte("z"))
	s.Put([]byte("b"), value)
	s.DeleteRange([]byte("m"), []byte("p"))
	s.DeleteRange([]byte("x"), nil)
	// Reads of a store with pending ranges, hidden or not, cost no
	// allocation; nor do those of a store whose neighbour has ranges.
	if n := testing.AllocsPerRun(100, func() {
		_, _, _ = s.Get(ka) // cached, outside the ranges
		_, _, _ = s.Get(kz) // cached, hidden
		_, _, _ = s.Get(kn) // never seen, hidden
		_, _, _ = s.Get(kb) // dirty
		hot.Put(key, value)
		_, _, _ = hot.Get(key)
		_, _, _ = cold.Get(key) // cached miss after the first run
	}); n != 0 {
		t.Errorf("reads with pending ranges: %v allocs; want 0", n)
	}
}

// Scans interleaved with writes inside a transaction: once a scan has
// ordered the unsorted dirty keys, later writes must join that order (a
// session store scans on every record).
func TestStoreBufferScanModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	db := newDB(t)
	b := state.NewBuffer(db, nil)
	s := b.Store("s")
	key := func() string { return fmt.Sprintf("k%03d", rng.IntN(200)) }
	committed := map[string]string{}
	for round := range 300 {
		view := maps.Clone(committed)
		for range rng.IntN(60) {
			switch k := key(); rng.IntN(7) {
			case 0, 1:
				v := fmt.Sprintf("r%d-%d", round, rng.IntN(1000))
				s.Put([]byte(k), []byte(v))
				view[k] = v
			case 2:
				s.Delete([]byte(k))
				delete(view, k)
			case 3:
				upper := key()
				s.DeleteRange([]byte(k), []byte(upper))
				for m := range view {
					if m >= k && m < upper {
						delete(view, m)
					}
				}
			case 4:
				// A scan whose callback writes: the buffered keys it
				// visits are those in range when it started, with the
				// values they had then (the DB side is committed data);
				// the writes show afterwards.
				lower, upper := k, key()
				want := inRange(view, lower, upper)
				var got []KV
				err := s.Scan([]byte(lower), []byte(upper), func(key, value []byte) error {
					got = append(got, KV{string(key), string(value)})
					w := fmt.Sprintf("w%d", round)
					s.Put(key, []byte(w))
					view[string(key)] = w
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("round %d: writing Scan(%s, %s) = %q; want %q", round, lower, upper, got, want)
				}
			default:
				lower, upper := k, key()
				if got, want := scanAll(t, s, []byte(lower), []byte(upper)), inRange(view, lower, upper); !reflect.DeepEqual(got, want) {
					t.Fatalf("round %d: Scan(%s, %s) = %q; want %q", round, lower, upper, got, want)
				}
			}
		}
		if rng.IntN(4) == 0 {
			b.Reset()
			continue
		}
		if err := db.Apply(&state.Batch{Ranges: b.Ranges(nil), Writes: b.Writes(nil)}); err != nil {
			t.Fatal(err)
		}
		b.Commit()
		committed = view
	}
}

// inRange lists view's entries with keys in [lower, upper), sorted.
func inRange(view map[string]string, lower, upper string) []KV {
	var kvs []KV
	for k, v := range view {
		if k >= lower && k < upper {
			kvs = append(kvs, KV{k, v})
		}
	}
	slices.SortFunc(kvs, func(a, b KV) int { return strings.Compare(a.Key, b.Key) })
	return kvs
}

// A range deleted after a scan ordered the dirty keys takes its keys out of
// that order too: a later scan whose callback writes one of them again must
// not visit it (the buffered keys a scan visits are fixed when it starts).
func TestStoreBufferScanAfterDeleteRange(t *testing.T) {
	b := state.NewBuffer(newDB(t), nil)
	s := b.Store("s")
	for _, k := range []string{"k1", "k8", "k5", "k3"} { // unsorted: the scan orders them
		s.Put([]byte(k), []byte("v"))
	}
	if got := scanAll(t, s, nil, nil); len(got) != 4 {
		t.Fatalf("scan = %q", got)
	}
	s.DeleteRange([]byte("k4"), []byte("k6"))
	var got []string
	err := s.Scan(nil, nil, func(key, _ []byte) error {
		got = append(got, string(key))
		if string(key) == "k3" {
			s.Put([]byte("k5"), []byte("new"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"k1", "k3", "k8"}; !slices.Equal(got, want) {
		t.Fatalf("scan visited %q; want %q", got, want)
	}
}

// Writes come out in the order the transaction first wrote each key,
// every key once, whatever scans ordered the dirty keys in between.
func TestBufferWritesInWriteOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for round := range 100 {
		b := state.NewBuffer(nil, nil)
		s := b.Store("s")
		seen := map[string]bool{}
		var want []string
		for range 1 + rng.IntN(60) {
			k := fmt.Appendf(nil, "k%02d", rng.IntN(40))
			if !seen[string(k)] {
				seen[string(k)] = true
				want = append(want, string(k))
			}
			s.Put(k, []byte("v"))
			if rng.IntN(10) == 0 {
				scanAll(t, s, nil, nil) // orders the dirty keys for the scan
			}
		}
		var got []string
		for _, w := range b.Writes(nil) {
			got = append(got, string(w.Key))
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: Writes in order\n%q\nwant\n%q", round, got, want)
		}
	}
}

// TestBufferChangelogModel runs random transactions of gets, puts, deletes,
// scans whose callback deletes or rewrites the keys it is passed, and
// (in some runs) range deletes, over stores that start empty (known whole)
// or seeded, under cache budgets of a few slots (evicting at each commit)
// or ample, committing as the runtime does or aborting. It compares every read with a
// model, the DB after each commit, and a restore: a fresh DB that replays
// every committed Write (the changelog) and then the committed ranges (which
// the changelog does not hold; their owner applies them again after a
// restore) must equal the model with the same ranges applied. A delete that
// Writes leaves out although the DB held the key shows up as a key back
// from the dead in the DB or in the restore.
func TestBufferChangelogModel(t *testing.T) {
	for run := range 24 {
		seeded, ranges, long := run%2 == 1, run%4 >= 2, run%8 >= 4
		budget := []int64{1 << 10, 3 << 10, 1 << 20}[run%3]
		t.Run(fmt.Sprintf("run%d-seeded=%v-ranges=%v-long=%v-budget=%d", run, seeded, ranges, long, budget), func(t *testing.T) {
			testChangelogModel(t, uint64(run), seeded, ranges, long, budget)
		})
	}
}

// testChangelogModel is one run of TestBufferChangelogModel. Long keys share
// a prefix longer than a radix digit, with 0x00 and 0xff bytes, and some are
// prefixes of others; there are enough of them for a transaction to write
// more than a comparison sort's run (sortkeys.go).
func testChangelogModel(t *testing.T, seed uint64, seeded, ranges, long bool, budget int64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	nkeys, nops := 24, 12
	keyAt := func(i int) string { return fmt.Sprintf("k%02d", i) }
	if long {
		nkeys, nops = 80, 120
		keyAt = func(i int) string {
			return "\x05join\x00\xff\xff\x00shared12" + string([]byte{byte(i % 5)}) + strings.Repeat("\x00", i%4) + string([]byte{byte(i / 20)})
		}
	}
	key := func() string { return keyAt(rng.IntN(nkeys)) }
	committed := map[string]string{}
	var changelog []state.Write
	var seedKVs []KV
	if seeded {
		for i := range nkeys / 2 {
			kv := KV{keyAt(2 * i), "seed"}
			seedKVs = append(seedKVs, kv)
			committed[kv.Key] = kv.Value
			changelog = append(changelog, state.Write{Store: "s", Key: []byte(kv.Key), Value: []byte(kv.Value)})
		}
	}
	db := newDB(t, seedKVs...)
	b := state.NewBuffer(db, state.NewCacheBudget(budget))
	s := b.Store("s")
	var logged []state.DeleteRange // committed ranges, in commit order
	applyRanges := func(m map[string]string) {
		for _, r := range logged { // the test's ranges all have an upper bound
			deleteIn(m, string(r.Lower), string(r.Upper))
		}
	}
	sorted := func(m map[string]string) []KV {
		var kvs []KV
		for _, k := range slices.Sorted(maps.Keys(m)) {
			kvs = append(kvs, KV{k, m[k]})
		}
		return kvs
	}
	check := func(round int, k string, view map[string]string) {
		t.Helper()
		v, ok, err := s.Get([]byte(k))
		if want, wantOK := view[k]; err != nil || ok != wantOK || string(v) != want {
			t.Fatalf("round %d: Get(%q) = %q, %v, %v; want %q, %v", round, k, v, ok, err, want, wantOK)
		}
	}
	for round := range 400 {
		view := maps.Clone(committed)
		n := rng.IntN(nops)
		for i := range n {
			op := rng.IntN(9)
			if (op == 5 || op == 6) && i < n/2 {
				op = 0 // writes first: the first scan sorts many dirty keys
			}
			switch k := key(); op {
			case 0, 1:
				v := fmt.Sprintf("r%d-%d", round, rng.IntN(1000))
				s.Put([]byte(k), []byte(v))
				view[k] = v
			case 2:
				s.Delete([]byte(k))
				delete(view, k)
			case 3:
				// A read then a write of the same key (the lookup memo).
				check(round, k, view)
				if rng.IntN(2) == 0 {
					s.Delete([]byte(k))
					delete(view, k)
				} else {
					v := fmt.Sprintf("g%d", round)
					s.Put([]byte(k), []byte(v))
					view[k] = v
				}
			case 4:
				if !ranges {
					continue
				}
				upper := key()
				s.DeleteRange([]byte(k), []byte(upper))
				deleteIn(view, k, upper)
			case 5:
				// A scan that consumes some of what it reads (the join's
				// take), rewrites some, and deletes another key.
				lower, upper := k, key()
				want := inRange(view, lower, upper)
				var got []KV
				type hide struct{ at, lo, hi string }
				var hidden []hide // ranges fn deleted, and where
				aborted := false  // fn called Reset: the scan's output is not modelled
				err := s.Scan([]byte(lower), []byte(upper), func(kb, vb []byte) error {
					got = append(got, KV{string(kb), string(vb)})
					if rng.IntN(30) == 0 {
						// The transaction aborts under the scan; the key
						// it was passed is then deleted below, or put.
						b.Reset()
						view, aborted = maps.Clone(committed), true
					}
					if ranges && rng.IntN(8) == 0 {
						// A range from this key on: it hides the keys the
						// scan has yet to reach; the key itself is then
						// deleted or put again below.
						hi := key()
						s.DeleteRange(kb, []byte(hi))
						hidden = append(hidden, hide{string(kb), string(kb), hi})
						deleteIn(view, string(kb), hi)
					}
					switch rng.IntN(4) {
					case 0, 1:
						s.Delete(kb)
						delete(view, string(kb))
					case 2:
						w := fmt.Sprintf("w%d", round)
						s.Put(kb, []byte(w))
						view[string(kb)] = w
					default:
						// Another key the scan has passed or will not
						// reach (a write ahead of it may hide a key it
						// has yet to pass, which the model leaves alone).
						if o := key(); o <= string(kb) || o >= upper {
							s.Delete([]byte(o))
							delete(view, o)
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				want = slices.DeleteFunc(want, func(kv KV) bool {
					for _, h := range hidden {
						if kv.Key > h.at && kv.Key >= h.lo && kv.Key < h.hi {
							return true
						}
					}
					return false
				})
				if !aborted && !reflect.DeepEqual(got, want) {
					t.Fatalf("round %d: consuming Scan(%q, %q) = %q; want %q", round, lower, upper, got, want)
				}
			case 6:
				lower, upper := k, key()
				if got, want := scanAll(t, s, []byte(lower), []byte(upper)), inRange(view, lower, upper); !reflect.DeepEqual(got, want) {
					t.Fatalf("round %d: Scan(%q, %q) = %q; want %q", round, lower, upper, got, want)
				}
			default:
				check(round, k, view)
			}
		}
		if rng.IntN(5) == 0 {
			b.Reset()
			continue
		}
		rs, ws := b.Ranges(nil), b.Writes(nil)
		if len(ws) > b.Len() {
			t.Fatalf("round %d: %d writes; Len says at most %d", round, len(ws), b.Len())
		}
		if err := db.Apply(&state.Batch{Ranges: rs, Writes: ws}); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			logged = append(logged, state.DeleteRange{Store: r.Store, Lower: bytes.Clone(r.Lower), Upper: bytes.Clone(r.Upper)})
		}
		for _, w := range ws {
			changelog = append(changelog, state.Write{Store: w.Store, Key: bytes.Clone(w.Key), Value: bytes.Clone(w.Value), Delete: w.Delete})
		}
		b.Commit()
		committed = view
		if got, want := dbScan(t, db, "s"), sorted(committed); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: DB = %q; want %q", round, got, want)
		}
		restored := newDB(t)
		if err := restored.Apply(&state.Batch{Writes: changelog}); err != nil {
			t.Fatal(err)
		}
		if err := restored.Apply(&state.Batch{Ranges: logged}); err != nil {
			t.Fatal(err)
		}
		want := maps.Clone(committed)
		applyRanges(want)
		if got := dbScan(t, restored, "s"); !reflect.DeepEqual(got, sorted(want)) {
			t.Fatalf("round %d: restored from the changelog = %q; want %q", round, got, sorted(want))
		}
		// Every key read after the commit, from a warm cache or the DB.
		for i := range nkeys {
			check(round, keyAt(i), committed)
		}
		b.Commit() // the reads' transaction, empty
	}
}

// deleteIn deletes view's keys in [lower, upper).
func deleteIn(view map[string]string, lower, upper string) {
	for k := range view {
		if k >= lower && k < upper {
			delete(view, k)
		}
	}
}
