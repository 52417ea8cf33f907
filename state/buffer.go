package state

import (
	"bytes"
	"fmt"
	"slices"
)

// A store buffer keeps the slots of keys it has seen across transactions, so
// that a key used in every transaction (a counter, a window aggregate) costs
// no allocation once warm. After Commit a slot also caches the committed
// value, so the next transaction reads it without going to the database
// (the ledger spent a quarter of its CPU in Pebble's Get without this).
// These limits bound what a buffer keeps between transactions; past either
// one, every slot is forgotten and the next transaction starts cold. They
// are per store.
const (
	maxRetainedSlots = 1 << 16
	maxRetainedBytes = 16 << 20
)

// Buffer holds the uncommitted writes of one task, over all of its stores
// (DESIGN.md §3 step 1). Reads see the buffer first and the task's DB second,
// so processors read their own writes, while the DB only ever holds what
// committed transactions wrote. A Buffer is used by one goroutine at a time,
// like the task that owns it.
type Buffer struct {
	db     DB
	stores map[string]*StoreBuffer
	names  []string // sorted, so Writes need not sort store names each time
	// gen numbers the current transaction. A slot is dirty when its gen
	// equals this one; Reset bumps it instead of visiting every slot.
	gen   uint64
	dirty int
}

// NewBuffer returns an empty buffer over db. A nil db behaves like an empty
// database, which is handy for tests of processors that never commit.
func NewBuffer(db DB) *Buffer {
	return &Buffer{db: db, stores: make(map[string]*StoreBuffer), gen: 1}
}

// Store returns the handle of the named store, creating it on first use.
// Handles stay valid for the life of the Buffer (Reset included), so a
// processor should look its store up once and keep the handle.
func (b *Buffer) Store(name string) *StoreBuffer {
	if s, ok := b.stores[name]; ok {
		return s
	}
	s := &StoreBuffer{buf: b, name: name, index: make(map[string]int), sorted: true}
	b.stores[name] = s
	i, _ := slices.BinarySearch(b.names, name)
	b.names = slices.Insert(b.names, i, name)
	return s
}

// Len returns the number of dirty keys over all stores: the number of
// changelog records the next flush will produce.
func (b *Buffer) Len() int { return b.dirty }

// Writes appends every dirty write to dst and returns it: stores in name
// order, keys in ascending byte order within a store. The deterministic order
// makes changelog contents reproducible and lets backends write sorted
// batches. The slices in the Writes alias the buffer and stay valid until
// the next write of their key or Reset; they must not be modified.
func (b *Buffer) Writes(dst []Write) []Write {
	dst = slices.Grow(dst, b.dirty)
	for _, name := range b.names {
		s := b.stores[name]
		s.sortDirty()
		for _, i := range s.dirty {
			sl := &s.slots[i]
			w := Write{Store: s.name, Key: clip(sl.key)}
			if sl.deleted {
				w.Delete = true
			} else {
				w.Value = clip(sl.value)
			}
			dst = append(dst, w)
		}
	}
	return dst
}

// Commit ends the transaction after its writes were applied to the DB: the
// written values become the cached committed values of their keys. Store
// handles stay valid.
func (b *Buffer) Commit() { b.end(true) }

// Reset drops every dirty entry, because the transaction aborted (or to
// start over): the keys it wrote read from the DB again. Store handles stay
// valid and the memory of recently used keys is kept, within the retention
// limits above.
func (b *Buffer) Reset() { b.end(false) }

func (b *Buffer) end(committed bool) {
	b.gen++
	b.dirty = 0
	for _, s := range b.stores {
		s.reset(committed)
	}
}

// StoreBuffer is the view of one store through a Buffer.
type StoreBuffer struct {
	buf  *Buffer
	name string
	// index maps a key to its slot. Lookups use the m[string(key)] form,
	// which the compiler turns into a lookup without allocation.
	index map[string]int
	slots []slot
	// dirty lists the slots written in the current transaction; sorted
	// tells whether it is in ascending key order.
	dirty  []int
	sorted bool
	// retained approximates the bytes held by slots, for the limits.
	retained int
	// scratch is reused by the outermost Scan to snapshot the dirty range.
	scratch  []int
	scanning int
}

// slot is one key the store buffer knows. It is dirty in the transaction
// whose number is gen. Otherwise, when clean is set, value (or deleted)
// is the key's committed value, the same as the DB's; when not, the slot
// is only kept to reuse its memory.
type slot struct {
	key     []byte
	value   []byte
	gen     uint64
	deleted bool
	clean   bool
}

// Name returns the store's name.
func (s *StoreBuffer) Name() string { return s.name }

// Get returns the value of key: the buffered value if the key was written in
// the current transaction (a buffered delete means not found), else the DB's.
// The caller must not modify the returned slice; a buffered value stays
// valid until the next write of key or Reset.
func (s *StoreBuffer) Get(key []byte) (value []byte, ok bool, err error) {
	i, known := s.index[string(key)]
	if known {
		if sl := &s.slots[i]; sl.gen == s.buf.gen || sl.clean {
			if sl.deleted {
				return nil, false, nil
			}
			return clip(sl.value), true, nil
		}
	}
	if s.buf.db == nil {
		return nil, false, nil
	}
	value, ok, err = s.buf.db.Get(s.name, key)
	if err != nil {
		return nil, false, fmt.Errorf("state: get from store %q: %w", s.name, err)
	}
	// Cache what the DB holds, a miss included, for later transactions.
	if !known {
		i = s.newSlot(key)
	}
	sl := &s.slots[i]
	old := cap(sl.value)
	sl.value = append(sl.value[:0], value...)
	s.retained += cap(sl.value) - old
	sl.deleted, sl.clean = !ok, true
	return clip(sl.value), ok, nil
}

// Put buffers key = value. Both are copied; when the key already has a slot,
// its value memory is reused, so rewriting a key does not allocate.
func (s *StoreBuffer) Put(key, value []byte) {
	sl := s.slot(key)
	sl.deleted = false
	old := cap(sl.value)
	sl.value = append(sl.value[:0], value...)
	s.retained += cap(sl.value) - old
}

// Delete buffers the removal of key. It hides the DB's value from reads of
// this buffer until Reset.
func (s *StoreBuffer) Delete(key []byte) {
	sl := s.slot(key)
	sl.deleted = true
	sl.value = sl.value[:0]
}

// Scan calls fn for each key of the merged view (buffer over DB) in
// [lower, upper), in ascending byte order; a nil upper means no upper bound.
// Buffered puts override the DB's values and buffered deletes hide its keys.
// The slices passed to fn are valid only during the call and must not be
// modified. An error from fn stops the scan and is returned as is.
//
// fn may write to the store: the set of buffered keys the scan visits is
// fixed when it starts, while the DB side follows the DB's own rules.
func (s *StoreBuffer) Scan(lower, upper []byte, fn func(key, value []byte) error) error {
	s.sortDirty()
	lo, _ := slices.BinarySearchFunc(s.dirty, lower, s.cmpSlot)
	hi := len(s.dirty)
	if upper != nil {
		hi, _ = slices.BinarySearchFunc(s.dirty, upper, s.cmpSlot)
	}
	if hi < lo {
		hi = lo // upper <= lower: an empty range
	}
	// Snapshot the range, because fn may write (appending to s.dirty) or
	// start another scan (sorting s.dirty in place).
	var pending []int
	if s.scanning == 0 {
		pending = append(s.scratch[:0], s.dirty[lo:hi]...)
		defer func() { s.scratch = pending[:0] }()
	} else {
		pending = slices.Clone(s.dirty[lo:hi])
	}
	s.scanning++
	defer func() { s.scanning-- }()

	gen := s.buf.gen
	next := 0
	// emitBuffered passes the pending buffered keys up to and including
	// limit to fn (all of them if limit is nil) and reports whether the last
	// one equalled limit, which then hides the DB's entry.
	emitBuffered := func(limit []byte) (shadowed bool, err error) {
		for ; next < len(pending); next++ {
			i := pending[next]
			if i >= len(s.slots) || s.slots[i].gen != gen {
				continue // fn called Reset: the slot is no longer dirty
			}
			sl := &s.slots[i]
			c := 0
			if limit != nil {
				c = bytes.Compare(sl.key, limit)
				if c > 0 {
					return false, nil
				}
			}
			key, value, deleted := clip(sl.key), clip(sl.value), sl.deleted
			if !deleted {
				if err := fn(key, value); err != nil {
					next++
					return false, err
				}
			}
			if limit != nil && c == 0 {
				next++
				return true, nil
			}
		}
		return false, nil
	}

	if s.buf.db != nil {
		var fnErr error
		err := s.buf.db.Scan(s.name, lower, upper, func(key, value []byte) error {
			shadowed, err := emitBuffered(key)
			if err == nil && !shadowed {
				err = fn(key, value)
			}
			fnErr = err
			return err
		})
		if err != nil {
			if fnErr != nil && err == fnErr {
				return err
			}
			return fmt.Errorf("state: scan store %q: %w", s.name, err)
		}
	}
	_, err := emitBuffered(nil)
	return err
}

// PrefixScan is Scan over every key that starts with prefix.
func (s *StoreBuffer) PrefixScan(prefix []byte, fn func(key, value []byte) error) error {
	return s.Scan(prefix, PrefixEnd(prefix), fn)
}

// PrefixEnd returns the smallest key greater than every key that starts with
// prefix, for use as an exclusive upper bound, or nil when no such key
// exists (prefix is empty or all 0xff bytes), which Scan reads as unbounded.
func PrefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			end := slices.Clone(prefix[:i+1])
			end[i]++
			return end
		}
	}
	return nil
}

// slot returns the slot of key, creating it if needed and marking it dirty
// in the current transaction.
func (s *StoreBuffer) slot(key []byte) *slot {
	i, ok := s.index[string(key)]
	if !ok {
		i = s.newSlot(key)
	}
	sl := &s.slots[i]
	if sl.gen != s.buf.gen {
		sl.gen = s.buf.gen
		s.dirty = append(s.dirty, i)
		s.buf.dirty++
		// Keys written in ascending order (a common pattern) keep the
		// dirty list sorted, and Writes and Scan skip the sort.
		if n := len(s.dirty); s.sorted && n > 1 && bytes.Compare(s.slots[s.dirty[n-2]].key, sl.key) > 0 {
			s.sorted = false
		}
	}
	return sl
}

// newSlot adds a slot for key, neither dirty nor clean, and returns its
// index.
func (s *StoreBuffer) newSlot(key []byte) int {
	i := len(s.slots)
	s.slots = append(s.slots, slot{key: bytes.Clone(key)})
	if s.slots[i].key == nil {
		s.slots[i].key = []byte{} // keep "" distinct from a missing key in Writes
	}
	s.index[string(key)] = i
	s.retained += 2 * len(key)
	return i
}

func (s *StoreBuffer) sortDirty() {
	if s.sorted {
		return
	}
	slices.SortFunc(s.dirty, func(a, b int) int { return bytes.Compare(s.slots[a].key, s.slots[b].key) })
	s.sorted = true
}

func (s *StoreBuffer) cmpSlot(i int, key []byte) int { return bytes.Compare(s.slots[i].key, key) }

func (s *StoreBuffer) reset(committed bool) {
	for _, i := range s.dirty {
		// Committed: the slot holds what the DB now holds. Aborted: it
		// holds a value that never committed.
		s.slots[i].clean = committed
	}
	s.dirty = s.dirty[:0]
	s.sorted = true
	if len(s.slots) > maxRetainedSlots || s.retained > maxRetainedBytes {
		// clear keeps the map's buckets, which saves regrowing them when
		// the next transaction is as big; past twice the limit (one huge
		// transaction) a fresh map gives the memory back.
		if len(s.index) <= 2*maxRetainedSlots {
			clear(s.index)
		} else {
			s.index = make(map[string]int)
		}
		s.slots = nil
		s.retained = 0
	}
}

// clip limits b's capacity to its length, so a caller appending to a slice
// it got from the buffer reallocates instead of overwriting buffer memory.
func clip(b []byte) []byte { return b[:len(b):len(b)] }
