package statetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/eddy-streams/eddy/state"
)

// The tests in this file cover Batch.Ranges: range deletes that window
// stores use to drop expired segments (docs/design.md §5).

func rng(store string, lower, upper []byte) state.DeleteRange {
	return state.DeleteRange{Store: store, Lower: lower, Upper: upper}
}

func applyRanges(t *testing.T, db state.DB, ranges []state.DeleteRange, writes ...state.Write) {
	t.Helper()
	if err := db.Apply(&state.Batch{Ranges: ranges, Writes: writes}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// rangeKeys are the keys every range test starts from, in order: binary
// keys at both ends, so bounds at the edges of the key space are covered.
var rangeKeys = []string{"", "\x00", "a", "b", "b\x00", "c", "d", "e", "\xff", "\xff\xff"}

func seedRange(t *testing.T, db state.DB, stores ...string) {
	t.Helper()
	var writes []state.Write
	for _, s := range stores {
		for _, k := range rangeKeys {
			writes = append(writes, put(s, k, s+"="+k))
		}
	}
	apply(t, db, writes...)
}

// kvsExcept returns the seeded content of store minus the keys in drop.
func kvsExcept(store string, drop ...string) []KV {
	var out []KV
	for _, k := range rangeKeys {
		dropped := false
		for _, d := range drop {
			dropped = dropped || d == k
		}
		if !dropped {
			out = append(out, KV{k, store + "=" + k})
		}
	}
	return out
}

func testDeleteRange(t *testing.T, b state.Backend, dir string) {
	tests := []struct {
		name   string
		ranges []state.DeleteRange
		drop   []string // keys of store "s" that must be gone
	}{
		{"middle", []state.DeleteRange{rng("s", []byte("b"), []byte("d"))}, []string{"b", "b\x00", "c"}},
		{"upper is exclusive", []state.DeleteRange{rng("s", []byte("b"), []byte("b\x00"))}, []string{"b"}},
		{"bounds between keys", []state.DeleteRange{rng("s", []byte("a\x00"), []byte("cc"))}, []string{"b", "b\x00", "c"}},
		{"nil lower", []state.DeleteRange{rng("s", nil, []byte("b"))}, []string{"", "\x00", "a"}},
		{"nil upper", []state.DeleteRange{rng("s", []byte("d"), nil)}, []string{"d", "e", "\xff", "\xff\xff"}},
		{"empty upper is the end", []state.DeleteRange{rng("s", []byte("e"), []byte{})}, []string{"e", "\xff", "\xff\xff"}},
		{"whole store", []state.DeleteRange{rng("s", nil, nil)}, rangeKeys},
		{"upper past every key", []state.DeleteRange{rng("s", []byte("\xff"), []byte("\xff\xff\xff"))}, []string{"\xff", "\xff\xff"}},
		{"empty range", []state.DeleteRange{rng("s", []byte("c"), []byte("c"))}, nil},
		{"inverted range", []state.DeleteRange{rng("s", []byte("d"), []byte("b"))}, nil},
		{"store without keys", []state.DeleteRange{rng("nothing", nil, nil)}, nil},
		{"overlapping", []state.DeleteRange{
			rng("s", []byte("a"), []byte("c")),
			rng("s", []byte("b"), []byte("d")),
			rng("s", []byte("b\x00"), []byte("b\x01")),
		}, []string{"a", "b", "b\x00", "c"}},
		{"disjoint", []state.DeleteRange{
			rng("s", nil, []byte("a")),
			rng("s", []byte("e"), nil),
		}, []string{"", "\x00", "e", "\xff", "\xff\xff"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := Open(t, b, fmt.Sprintf("%s-%d", dir, i))
			seedRange(t, db, "s", "t")
			applyRanges(t, db, tt.ranges)
			want := kvsExcept("s", tt.drop...)
			wantScan(t, db, "s", nil, nil, want)
			for _, k := range rangeKeys {
				_, ok, err := db.Get("s", []byte(k))
				if err != nil {
					t.Fatal(err)
				}
				gone := false
				for _, d := range tt.drop {
					gone = gone || d == k
				}
				if ok == gone {
					t.Errorf("Get(s, %q): found %v; want %v", k, ok, !gone)
				}
			}
			// The other store is untouched, whatever the bounds.
			wantScan(t, db, "t", nil, nil, kvsExcept("t"))
		})
	}
}

// testDeleteRangeStoreNames checks that a range never leaves its store, for
// store names that are prefixes of each other: in a layout of name + 0x00 +
// key, store "a" ends where "a\x01" and "ab" begin.
func testDeleteRangeStoreNames(t *testing.T, b state.Backend, dir string) {
	stores := []string{"a", "a\x01", "a\xff", "ab", "abc", "b", "\xff"}
	for i, target := range stores {
		for j, bounds := range [][2][]byte{{nil, nil}, {[]byte(""), []byte("\xff\xff\xff")}, {[]byte("\xff"), nil}} {
			t.Run(fmt.Sprintf("%q/%d", target, j), func(t *testing.T) {
				db := Open(t, b, fmt.Sprintf("%s-%d-%d", dir, i, j))
				seedRange(t, db, stores...)
				applyRanges(t, db, []state.DeleteRange{rng(target, bounds[0], bounds[1])})
				for _, s := range stores {
					want := kvsExcept(s)
					if s == target {
						var drop []string
						for _, k := range rangeKeys {
							if k >= string(bounds[0]) && (bounds[1] == nil || k < string(bounds[1])) {
								drop = append(drop, k)
							}
						}
						want = kvsExcept(s, drop...)
					}
					wantScan(t, db, s, nil, nil, want)
				}
			})
		}
	}
}

// testDeleteRangeThenWrites checks the order within one batch: ranges
// first, then writes, so a key the batch writes survives a range over it.
func testDeleteRangeThenWrites(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	seedRange(t, db, "s")
	applyRanges(t, db,
		[]state.DeleteRange{rng("s", []byte("a"), []byte("d")), rng("s", []byte("c"), nil)},
		put("s", "b", "new"),        // existed, in a range: the new value stays
		put("s", "bb", "fresh"),     // did not exist, in a range: stays
		put("s", "\xff", "new-end"), // in the open-ended range
		del("s", "\x00"),            // outside the ranges: a plain delete
		put("s", "", "root"),
	)
	wantScan(t, db, "s", nil, nil, []KV{{"", "root"}, {"b", "new"}, {"bb", "fresh"}, {"\xff", "new-end"}})
	wantGet(t, db, "s", "b\x00", "", false)
	wantGet(t, db, "s", "\xff\xff", "", false)
	mustClose(t, db)
	db = Open(t, b, dir)
	wantScan(t, db, "s", nil, nil, []KV{{"", "root"}, {"b", "new"}, {"bb", "fresh"}, {"\xff", "new-end"}})
}

// testDeleteRangeAtomic checks that ranges share the batch's fate: applied
// with its offsets, or not at all when the batch fails.
func testDeleteRangeAtomic(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	seedRange(t, db, "s")
	before := state.NewOffsets()
	before.Changelog["s"] = 1
	before.StreamTime = 1000
	if err := db.Apply(&state.Batch{Offsets: before}); err != nil {
		t.Fatal(err)
	}
	bad := []*state.Batch{
		{ // a bad write after good ranges
			Ranges:  []state.DeleteRange{rng("s", nil, nil)},
			Writes:  []state.Write{put("s", "a", "new"), put("bad\x00store", "k", "v")},
			Offsets: sampleOffsets(),
		},
		{ // a bad range after a good one
			Ranges:  []state.DeleteRange{rng("s", nil, []byte("c")), rng("", nil, nil)},
			Writes:  []state.Write{put("s", "a", "new")},
			Offsets: sampleOffsets(),
		},
		{
			Ranges:  []state.DeleteRange{rng("s\x00", nil, nil)},
			Offsets: sampleOffsets(),
		},
	}
	for i, batch := range bad {
		err := db.Apply(batch)
		if !errors.Is(err, state.ErrInvalidStoreName) {
			t.Fatalf("bad batch %d: Apply = %v; want ErrInvalidStoreName", i, err)
		}
		wantScan(t, db, "s", nil, nil, kvsExcept("s"))
		wantOffsets(t, db, before)
	}

	after := sampleOffsets()
	if err := db.Apply(&state.Batch{Ranges: []state.DeleteRange{rng("s", []byte("b"), nil)}, Offsets: after}); err != nil {
		t.Fatal(err)
	}
	want := kvsExcept("s", "b", "b\x00", "c", "d", "e", "\xff", "\xff\xff")
	wantScan(t, db, "s", nil, nil, want)
	wantOffsets(t, db, after)
	mustClose(t, db)
	db = Open(t, b, dir)
	wantScan(t, db, "s", nil, nil, want)
	wantOffsets(t, db, after)
}

// testDeleteRangeReopen checks that ranges are durable, including over many
// keys and across several batches, and that the store is writable after.
func testDeleteRangeReopen(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	const n = 3000
	var writes []state.Write
	for i := range n {
		writes = append(writes, put("w", fmt.Sprintf("seg-%02d/%05d", i/100, i), "v"))
	}
	apply(t, db, writes...)
	// Drop segments 00 to 09, one batch per segment, like expiry would,
	// then segment 20 onwards at once.
	for seg := range 10 {
		applyRanges(t, db, []state.DeleteRange{rng("w", fmt.Appendf(nil, "seg-%02d/", seg), fmt.Appendf(nil, "seg-%02d/", seg+1))})
	}
	applyRanges(t, db, []state.DeleteRange{rng("w", []byte("seg-20/"), nil)}, put("w", "seg-25/new", "v"))
	mustClose(t, db)
	db = Open(t, b, dir)
	got := Scan(t, db, "w", nil, nil)
	if len(got) != 1001 || got[0].Key != "seg-10/01000" || got[999].Key != "seg-19/01999" || got[1000].Key != "seg-25/new" {
		t.Fatalf("after reopen: %d keys from %v to %v; want seg-10/01000 to seg-19/01999, then seg-25/new", len(got), got[0], got[len(got)-1])
	}
	apply(t, db, put("w", "seg-05/again", "v"))
	wantGet(t, db, "w", "seg-05/again", "v", true)
}
