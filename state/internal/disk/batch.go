package disk

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/keys"
	"github.com/eddy-streams/eddy/state/internal/offsetcodec"
)

// errNilBatch is Copy's answer to a nil batch.
var errNilBatch = errors.New("nil batch")

// Encoder turns a state.Batch into the operations of one engine batch, in
// two steps: Copy takes the batch into the encoder's own memory, on the
// caller's goroutine, so that the caller may change the batch's memory at
// once (a write buffer's slots); Encode adds it to an engine's batch, on
// any goroutine, sorted. It keeps its memory from batch to batch.
type Encoder struct {
	// arena holds the batch's database keys and values, one after the
	// other: the sort and the engine's copy then read memory in order,
	// not the slots of a write buffer spread over the heap.
	arena  []byte
	ranges []op // start in key, end in value
	writes []op
	// sorted holds the writes' indexes in database-key order, next to an
	// abbreviation of their keys (see abbreviate).
	sorted  []sortEntry
	meta    []byte // the encoded offsets
	offsets state.Offsets
}

// op is a range delete or a write, its slices in the arena.
type op struct {
	key, value []byte
	delete     bool
}

// Copy takes b into e, replacing the batch it held. An invalid store name
// fails Copy, before any engine sees the batch.
func (e *Encoder) Copy(b *state.Batch) error {
	if b == nil {
		return errNilBatch
	}
	size := 0
	for _, r := range b.Ranges {
		if err := state.CheckStoreName(r.Store); err != nil {
			return err
		}
		size += 2*keys.PrefixLen(r.Store) + len(r.Lower) + len(r.Upper)
	}
	for _, wr := range b.Writes {
		if err := state.CheckStoreName(wr.Store); err != nil {
			return err
		}
		size += keys.PrefixLen(wr.Store) + len(wr.Key) + len(wr.Value)
	}
	// One allocation at most, so the slices taken below stay in it (were
	// it to grow, they would still be right, in the old array).
	e.arena = slices.Grow(e.arena[:0], size)
	// The ops too: a commit at the end of the input can hold millions of
	// writes, and growing by doubling copies them over and over.
	e.ranges = slices.Grow(e.ranges[:0], len(b.Ranges))
	e.writes = slices.Grow(e.writes[:0], len(b.Writes))
	for _, r := range b.Ranges {
		if len(r.Upper) != 0 && bytes.Compare(r.Lower, r.Upper) >= 0 {
			continue // empty, and both engines want start < end
		}
		n := len(e.arena)
		e.arena = keys.Append(e.arena, r.Store, r.Lower)
		start := e.since(n)
		n = len(e.arena)
		if len(r.Upper) == 0 {
			e.arena = keys.AppendStoreEnd(e.arena, r.Store)
		} else {
			e.arena = keys.Append(e.arena, r.Store, r.Upper)
		}
		e.ranges = append(e.ranges, op{key: start, value: e.since(n)})
	}
	for _, wr := range b.Writes {
		n := len(e.arena)
		e.arena = keys.Append(e.arena, wr.Store, wr.Key)
		k := e.since(n)
		var v []byte
		if !wr.Delete {
			n = len(e.arena)
			e.arena = append(e.arena, wr.Value...)
			v = e.since(n)
		}
		e.writes = append(e.writes, op{key: k, value: v, delete: wr.Delete})
	}
	e.meta = offsetcodec.Append(e.meta[:0], b.Offsets)
	e.offsets = b.Offsets.Clone()
	return nil
}

// since returns what was appended to the arena after its first n bytes.
func (e *Encoder) since(n int) []byte { return e.arena[n:len(e.arena):len(e.arena)] }

// Offsets returns the offsets of the batch Copy took.
func (e *Encoder) Offsets() state.Offsets { return e.offsets }

// Size is about the bytes Encode adds to a batch: the keys, values and
// offsets, and a few bytes of each operation's header.
func (e *Encoder) Size() int {
	return len(e.arena) + len(e.meta) + 64 + 16*(len(e.ranges)+len(e.writes))
}

// Encode adds the batch Copy took to w: its ranges, then its writes in key
// order, then its offsets. Both engines number a batch's operations in the
// order they were added, and a range tombstone deletes only keys with
// lower numbers, so the writes survive the ranges, as state.Batch
// specifies. The writes go in sorted, whatever order they came in (a write
// buffer lists its keys in the order they were first written): Pebble's
// memtable inserts each key of a sorted batch next to the one before,
// while an unsorted one took almost five times the insert time at a
// million keys. The offsets key sorts after every store key (package
// keys), so the whole batch is in order.
func (e *Encoder) Encode(w Writer) error {
	for _, r := range e.ranges {
		if err := w.DeleteRange(r.key, r.value); err != nil {
			return err
		}
	}
	for _, i := range e.sortWrites() {
		wr := &e.writes[i.index]
		var err error
		if wr.delete {
			err = w.Delete(wr.key)
		} else {
			err = w.Set(wr.key, wr.value)
		}
		if err != nil {
			return err
		}
	}
	return w.Set(keys.Offsets(), e.meta)
}

// sortWrites returns the writes' indexes in key order. It sorts
// abbreviated keys, as PostgreSQL's sorts do: the 8 bytes after the prefix
// that all keys share, as a number, next to the write's index, comparing
// whole keys only when two abbreviations are equal, so that most
// comparisons touch no key. Writes of one key (a restore's batch spans
// transactions) keep their order.
func (e *Encoder) sortWrites() []sortEntry {
	s := e.sorted[:0]
	if len(e.writes) == 0 {
		return s
	}
	first := e.writes[0].key
	shared := len(first)
	for _, wr := range e.writes[1:] {
		n := min(shared, len(wr.key))
		j := 0
		for j < n && wr.key[j] == first[j] {
			j++
		}
		shared = j
	}
	inOrder := true
	for i, wr := range e.writes {
		s = append(s, sortEntry{abbrev: abbreviate(wr.key[shared:]), index: i})
		if inOrder && i > 0 && bytes.Compare(e.writes[i-1].key, wr.key) > 0 {
			inOrder = false
		}
	}
	if !inOrder {
		slices.SortFunc(s, func(a, b sortEntry) int {
			if a.abbrev != b.abbrev {
				return cmp.Compare(a.abbrev, b.abbrev)
			}
			if c := bytes.Compare(e.writes[a.index].key, e.writes[b.index].key); c != 0 {
				return c
			}
			return cmp.Compare(a.index, b.index) // the later write of a key wins
		})
	}
	e.sorted = s
	return s
}

// sortEntry is a write in sortWrites' sort.
type sortEntry struct {
	abbrev uint64
	index  int
}

// abbreviate returns k's first 8 bytes as a big-endian number, padded with
// zeros: abbreviate(a) < abbreviate(b) implies a < b (a zero pad sorts
// like the end of a shorter key, before any byte), and equal
// abbreviations need the whole keys compared.
func abbreviate(k []byte) uint64 {
	var b [8]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:])
}
