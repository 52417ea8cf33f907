package state

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/google/btree"

	"github.com/eddy-streams/eddy/internal/chunked"
)

// A store buffer keeps the slots of keys it has seen across transactions, so
// that a key used in every transaction (a counter, a window aggregate) costs
// no allocation once warm. After Commit a slot also caches the committed
// value, so the next transaction reads it without going to the database
// (the ledger spent a quarter of its CPU in Pebble's Get without this, and
// at a million accounts three quarters). What the slots hold is bounded by
// the Buffer's CacheBudget, shared with the other tasks' buffers: past it,
// the least recently used keys are evicted one by one (see evict).

// slotOverhead approximates the memory of a slot beyond its key and value:
// the slot itself (72 bytes), its entry in the index map (whose key shares
// the slot's key bytes), and the spare capacity of the slot array and the
// map as they grow. 112 bytes counted a quarter less than a heap profile
// of the ledger at 5.75M accounts found. Neither the slot array nor Go's
// map shrinks: after a transaction far larger than the budget, the emptied
// slots (listed in free for reuse) keep their 72 bytes, uncounted.
const slotOverhead = 144

// Buffer holds the uncommitted writes of one task, over all of its stores
// (docs/design.md §3 step 1). Reads see the buffer first and the task's DB second,
// so processors read their own writes, while the DB only ever holds what
// committed transactions wrote. A Buffer is used by one goroutine at a time,
// like the task that owns it.
type Buffer struct {
	db     DB
	budget *CacheBudget
	stores map[string]*StoreBuffer
	names  []string // sorted, so Writes need not sort store names each time
	// gen numbers the current transaction. A slot is dirty when its gen
	// equals this one; Reset bumps it instead of visiting every slot.
	gen   uint64
	dirty int
	// ranges counts the pending range deletes over all stores, so that
	// Ranges costs nothing in the usual transaction without any.
	ranges int
	// aborts counts Resets: an owner that remembers issuing a range
	// delete learns from it that the range was dropped.
	aborts uint64
	// maxWrite bounds a write's key and value together (0: no bound); see
	// LimitWrites.
	maxWrite int
}

// NewBuffer returns an empty buffer over db whose caches of committed
// values share budget with other buffers; nil means a budget of
// DefaultBufferCache for this buffer alone. A nil db behaves like an empty
// database, which is handy for tests of processors that never commit. Close
// the buffer when done with it, to give its memory back to the budget.
func NewBuffer(db DB, budget *CacheBudget) *Buffer {
	if budget == nil {
		budget = NewCacheBudget(DefaultBufferCache)
	}
	return &Buffer{db: db, budget: budget, stores: make(map[string]*StoreBuffer), gen: 1}
}

// Close drops every slot and gives their memory back to the budget, the
// open transaction's writes included. The buffer must not be used after.
func (b *Buffer) Close() {
	for _, s := range b.stores {
		s.drop()
	}
}

// LimitWrites bounds what one write may hold, key and value together, to
// n bytes (0: no bound): the largest changelog record the owner can
// produce. The buffer does not refuse a larger write itself (Put returns
// no error); the typed stores check MaxWrite before they write, so that
// the write fails with the record that made it, not at the commit, where
// it would fail every transaction after every restart.
func (b *Buffer) LimitWrites(n int) { b.maxWrite = n }

// MaxWrite returns the bound LimitWrites set (0: none).
func (s *StoreBuffer) MaxWrite() int { return s.buf.maxWrite }

// Store returns the handle of the named store, creating it on first use.
// Handles stay valid for the life of the Buffer (Reset included), so a
// processor should look its store up once and keep the handle.
func (b *Buffer) Store(name string) *StoreBuffer {
	if s, ok := b.stores[name]; ok {
		return s
	}
	s := &StoreBuffer{buf: b, name: name, index: make(map[string]int), sorted: true}
	s.complete = b.storeEmpty(name)
	b.stores[name] = s
	i, _ := slices.BinarySearch(b.names, name)
	b.names = slices.Insert(b.names, i, name)
	return s
}

// storeEmpty reports whether the DB holds no key of the named store (false
// when it cannot tell).
func (b *Buffer) storeEmpty(name string) bool {
	if b.db == nil {
		return true
	}
	errFound := errors.New("found")
	return b.db.Scan(name, nil, nil, func(_, _ []byte) error { return errFound }) == nil
}

// Len returns the number of dirty keys over all stores: at most the number
// of changelog records the next flush will produce (a key the DB did not
// hold and the transaction deleted produces none).
func (b *Buffer) Len() int { return b.dirty }

// Writes appends every dirty write to dst and returns it: stores in name
// order, keys in the order the transaction first wrote them. The order is
// deterministic, so changelog contents are reproducible; the disk backends
// sort a batch themselves, off the task's goroutine (state/internal/disk).
// The slices in the Writes alias the buffer and stay valid until the next
// write of their key or Reset; they must not be modified.
//
// Writes are what the changelog gets. Range deletes are not among them (see
// StoreBuffer.DeleteRange), and neither are the writes that a later
// DeleteRange of the same transaction discarded.
func (b *Buffer) Writes(dst []Write) []Write {
	dst = slices.Grow(dst, b.dirty)
	for _, name := range b.names {
		s := b.stores[name]
		for _, i := range s.dirty {
			sl := s.slots.At(i)
			w := Write{Store: s.name, Key: clip(sl.key)}
			if sl.deleted && sl.absent {
				continue // deletes what the DB does not hold
			}
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

// Ranges appends the pending range deletes of the transaction to dst and
// returns it: stores in name order, then call order within a store. The
// runtime puts them in Batch.Ranges, next to Writes, which the DB applies
// after them; that order is what reads of the buffer showed. A range that an
// earlier range of the same store already contains is left out, since it
// would delete nothing more (so an owner that expires the same segment on
// every record does not grow the batch). A nil Upper means to the end of the
// store. The slices alias the buffer and stay valid until Commit or Reset;
// they must not be modified.
func (b *Buffer) Ranges(dst []DeleteRange) []DeleteRange {
	if b.ranges == 0 {
		return dst
	}
	dst = slices.Grow(dst, b.ranges)
	for _, name := range b.names {
		for _, r := range b.stores[name].ranges {
			dst = append(dst, DeleteRange{Store: name, Lower: clip(r.lower), Upper: clip(r.upper)})
		}
	}
	return dst
}

// Commit ends the transaction after its writes and ranges were applied to
// the DB, in one Batch{Ranges: b.Ranges(..), Writes: b.Writes(..)}: the
// written values become the cached committed values of their keys, and the
// cached keys in a range become cached misses. Store handles stay valid.
func (b *Buffer) Commit() { b.end(true) }

// Reset drops every dirty entry and pending range, because the transaction
// aborted (or to start over): the keys it wrote or ranged over read from the
// DB again. Store handles stay valid and the memory of recently used keys is
// kept, within the budget.
func (b *Buffer) Reset() { b.end(false) }

func (b *Buffer) end(committed bool) {
	// The stores first, while gen still tells which slots the ending
	// transaction wrote.
	for _, s := range b.stores {
		s.reset(committed)
	}
	b.gen++
	b.dirty = 0
	b.ranges = 0
	if !committed {
		b.aborts++
	}
}

// Transaction numbers the open transaction: it changes when the
// transaction ends (committed or reset). A store that must write a key once
// per transaction (a marker that has to stay in the changelog as long as
// the data beside it) compares it with the number it last wrote in.
func (s *StoreBuffer) Transaction() uint64 { return s.buf.gen }

// Aborts returns how many transactions were reset (aborted) so far. A
// store that issued a DeleteRange and finds this number changed knows the
// range never reached the database and must issue it again.
func (s *StoreBuffer) Aborts() uint64 { return s.buf.aborts }

// StoreBuffer is the view of one store through a Buffer.
type StoreBuffer struct {
	buf  *Buffer
	name string
	// index maps a key to its slot. Lookups use the m[string(key)] form,
	// which the compiler turns into a lookup without allocation.
	index map[string]int
	// slots are addressed by index; chunked, so growing to millions
	// never copies those already there.
	slots chunked.List[slot]
	// dirty lists the slots written in the current transaction; sorted
	// tells whether it is in ascending key order.
	dirty  []int
	sorted bool
	// ordered holds the dirty slots in key order once a Scan needed them
	// so while dirty was unsorted (indexed): a scan per record (a session
	// store) would otherwise sort the whole transaction's keys each time.
	// probe is the key that slot index -1 stands for in its searches.
	ordered *btree.BTreeG[int]
	indexed bool
	probe   []byte
	// byKey is a sorted copy of dirty, made by the transaction's first
	// Scan over an unsorted dirty list and good while no slot turns dirty
	// or clean (byKeyOK); a later Scan that finds it stale indexes dirty
	// in ordered instead. A join that stores a million records and then
	// scans them when their partner comes (Nexmark q5's counts) paid 9 %
	// of its CPU inserting them one by one into the index; one sort costs
	// a fraction of that. dirty itself keeps its order: Writes lists the
	// keys in the order they were first written.
	byKey              []int
	byKeyOK, byKeyMade bool
	sorter             keySorter
	// retained approximates the bytes held by slots, reported the part
	// of it that the budget counts (brought up to date at the end of each
	// transaction). free lists the slots that evict emptied, for reuse;
	// hand is where evict's CLOCK sweep resumes.
	retained, reported int
	free               []int
	hand               int
	// hits and misses count reads answered by the slots and by the DB
	// since they were last added to the budget's figures.
	hits, misses int64
	// complete is set while every key the DB holds in this store has a
	// slot: the store was empty when the buffer first used it, every key
	// committed since went through a slot, and no slot whose key the DB
	// may hold was evicted. A Get of a key without a slot then needs no
	// DB read: a new account, card or window is a miss the DB would only
	// have confirmed, at the price of a memtable seek and a bloom filter
	// probe per table (a quarter of the ledger's CPU at a million
	// accounts). The first such eviction clears it for good.
	complete bool
	// last is 1 + the slot the last Get read, 0 when none; missed is the
	// key of the last Get that found no slot in a store known whole
	// (while missedOK). A write that follows a read of its key (an
	// aggregate, a join storing a record after looking for its twin)
	// then finds its slot, or knows there is none, without a second
	// lookup in the index: in a map of millions, each costs cache misses.
	last     int
	missed   []byte
	missedOK bool
	// scratch is reused by the outermost Scan to snapshot the dirty range.
	// visiting is 1 + the slot whose key a Scan is passing to its fn, 0
	// when none: a Delete of that key (a scan that consumes what it
	// reads) then needs no lookup in the index, whose entry the CPU cache
	// no longer holds when the scan covers millions of keys.
	scratch  []int
	scanning int
	visiting int
	// ranges are the open transaction's range deletes in call order, for
	// Buffer.Ranges. cover is their union as sorted, disjoint intervals
	// that do not touch, for reads: a key is hidden when one of them
	// contains it. Both are empty in most transactions, and reads test
	// len(cover) before anything else, so they cost nothing then.
	ranges []keyRange
	cover  []keyRange
	// expired are the cover intervals of committed transactions, with the
	// number of the transaction that committed them, not yet settled into
	// the remembered keys: a clean slot that one of them contains and that
	// was cached at or before that transaction no longer holds what the DB
	// holds (the DB deleted the key). Get checks them; once there are
	// maxExpired, the commit settles them (marks such slots as cached
	// misses, one walk over the slots) and forgets them. Settling at every
	// commit with ranges cost a walk over every remembered key per expired
	// window segment, which grew with the state.
	expired []expiredRange
	// discarded are the slots a DeleteRange took out of the open
	// transaction's writes: at its commit the DB no longer has their keys,
	// which they then cache as misses.
	discarded []int
}

// expiredRange is a committed range delete and the transaction it
// committed in.
type expiredRange struct {
	keyRange
	gen uint64
}

// maxExpired bounds the committed ranges a Get may check before the commit
// settles them.
const maxExpired = 32

// keyRange is [lower, upper) over user keys; a nil upper means no bound.
// The bounds are the buffer's own copies and never modified, so cover and
// ranges can share them.
type keyRange struct {
	lower, upper []byte
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
	// ref tells evict that a read found the slot since the sweep last
	// passed it. Only reads set it: a key written or read once (a new
	// account, a window that will close) is not worth more than the
	// others until it is read again.
	ref bool
	// absent is set while the slot is dirty if the DB did not hold the
	// key when the transaction first wrote it (a cached miss, or a key
	// new to a store known whole). A Delete then leaves the DB as it
	// was, so Writes leaves it out: a join's record stored and dropped
	// in one transaction, or a window opened and closed in one, costs
	// no changelog record and no tombstone (Kafka Streams' caching
	// store forwards nothing either when both the old and the new value
	// are null). A key that a committed DeleteRange removed counts as
	// absent too, though the changelog may still hold its last put: the
	// range's owner drops it again after a restore (DeleteRange's
	// contract).
	absent bool
	// since is the first transaction whose committed range deletes the
	// clean value may not reflect: the one that read it from the DB (its
	// ranges apply at its commit, after the read), or the one after the
	// transaction that wrote it (whose own ranges applied before its
	// writes).
	since uint64
}

// Name returns the store's name.
func (s *StoreBuffer) Name() string { return s.name }

// Get returns the value of key: the buffered value if the key was written in
// the current transaction (a buffered delete means not found), else not
// found if a range delete of the transaction covers it, else the DB's.
// The caller must not modify the returned slice; a buffered value stays
// valid until the next write of key or Reset.
func (s *StoreBuffer) Get(key []byte) (value []byte, ok bool, err error) {
	i, known := s.index[string(key)]
	if known {
		s.last = i + 1
		// A dirty slot was written after any range that covers it
		// (DeleteRange discards earlier writes), so it wins; a clean one
		// holds the DB's value, which a pending range hides.
		if sl := s.slots.At(i); sl.gen == s.buf.gen || sl.clean && (len(s.cover) == 0 || !s.covered(key)) {
			if sl.gen != s.buf.gen && len(s.expired) != 0 && s.stale(sl) {
				// A committed range deleted the key from the DB since
				// it was cached, and no write came after (it would have
				// gone through this slot): a known miss now.
				sl.deleted, sl.since = true, s.buf.gen
				sl.value = sl.value[:0]
			}
			sl.ref = true
			s.hits++
			if sl.deleted {
				return nil, false, nil
			}
			return clip(sl.value), true, nil
		}
	}
	if len(s.cover) != 0 && s.covered(key) {
		// Neither read nor cached: the DB's value is about to go.
		return nil, false, nil
	}
	if s.buf.db == nil || !known && s.complete {
		s.hits++
		if !known {
			s.missed, s.missedOK = append(s.missed[:0], key...), true
		}
		return nil, false, nil
	}
	s.misses++
	value, ok, err = s.buf.db.Get(s.name, key)
	if err != nil {
		return nil, false, fmt.Errorf("state: get from store %q: %w: %w", s.name, ErrRead, err)
	}
	// Cache what the DB holds, a miss included, for later transactions.
	if !known {
		i = s.newSlot(key, len(value))
		s.last = i + 1
	}
	sl := s.slots.At(i)
	old := cap(sl.value)
	sl.value = append(sl.value[:0], value...)
	s.retained += cap(sl.value) - old
	sl.deleted, sl.clean, sl.since = !ok, true, s.buf.gen
	return clip(sl.value), ok, nil
}

// stale reports whether a committed range delete not yet settled removed
// clean slot sl's key from the DB after sl cached it.
func (s *StoreBuffer) stale(sl *slot) bool {
	for i := range s.expired {
		if e := &s.expired[i]; e.gen >= sl.since && inRange(sl.key, e.lower, e.upper) {
			return true
		}
	}
	return false
}

// Put buffers key = value. Both are copied; when the key already has a slot,
// its value memory is reused, so rewriting a key does not allocate.
func (s *StoreBuffer) Put(key, value []byte) {
	sl := s.slot(key, len(value))
	sl.deleted = false
	old := cap(sl.value)
	sl.value = append(sl.value[:0], value...)
	s.retained += cap(sl.value) - old
}

// Delete buffers the removal of key. It hides the DB's value from reads of
// this buffer until Reset.
func (s *StoreBuffer) Delete(key []byte) {
	var sl *slot
	if v := s.visiting - 1; v >= 0 && s.slots.At(v).gen == s.buf.gen && bytes.Equal(s.slots.At(v).key, key) {
		sl = s.slots.At(v) // dirty already, as slot would leave it
	} else {
		sl = s.slot(key, 0)
	}
	sl.deleted = true
	sl.value = sl.value[:0]
}

// DeleteRange deletes every key of the store in [lower, upper) in the open
// transaction. A nil or empty upper means to the end of the store (as in
// DeleteRange of a Batch); an upper <= lower deletes nothing. From the call
// on, reads (Get, Scan, PrefixScan) see no key in the range, neither the DB's
// nor one this transaction wrote before, until a later Put or Delete of the
// key in the same transaction, which is seen again. Ranges may overlap.
//
// The transaction's earlier writes in the range are discarded at the call:
// they leave Writes and Len, so they are never logged to the changelog. The
// range itself reaches the DB through Buffer.Ranges, which the DB applies
// before the transaction's writes.
//
// A range delete is NOT logged to the changelog: a restore from the
// changelog brings the keys back, since their last puts are still there. It
// is only for data that its owner drops again after a restore: expired window
// segments, whose owner re-applies expiry (from the stream time restored with
// the offsets) when it opens. Anything else must use Delete, key by key.
//
// Cost: the call copies the bounds and visits the transaction's dirty keys
// of the store. While ranges are pending, a read that is not of a dirty key
// pays a binary search over the union of the ranges, and a Scan reads the DB
// only outside them. Once committed, a read of a remembered key checks the
// committed ranges not yet settled (at most maxExpired), and every
// maxExpired committed ranges a commit visits every remembered key once. A
// store without ranges pays nothing.
func (s *StoreBuffer) DeleteRange(lower, upper []byte) {
	if len(upper) == 0 {
		upper = nil
	}
	if upper != nil && bytes.Compare(lower, upper) >= 0 {
		return
	}
	if n := len(s.dirty); n > 0 {
		kept := s.dirty[:0] // in place: a running Scan works on its own copy
		for _, i := range s.dirty {
			sl := s.slots.At(i)
			if inRange(sl.key, lower, upper) {
				// No longer dirty, and its value never committed.
				if s.indexed {
					s.ordered.Delete(i)
				}
				s.byKeyOK = false
				sl.gen, sl.clean = 0, false
				s.discarded = append(s.discarded, i)
				continue
			}
			kept = append(kept, i)
		}
		s.buf.dirty -= n - len(kept)
		s.dirty = kept
	}
	if s.contains(lower, upper) {
		return // the DB side is already covered; see Buffer.Ranges
	}
	r := keyRange{lower: bytes.Clone(lower), upper: bytes.Clone(upper)}
	s.ranges = append(s.ranges, r)
	s.buf.ranges++
	s.addCover(r)
}

func inRange(key, lower, upper []byte) bool {
	return bytes.Compare(key, lower) >= 0 && (upper == nil || bytes.Compare(key, upper) < 0)
}

// coverIndex returns the index of the first cover interval that ends after
// key, or len(cover). Ends ascend, since the intervals are sorted and
// disjoint.
func (s *StoreBuffer) coverIndex(key []byte) int {
	i, _ := slices.BinarySearchFunc(s.cover, key, func(r keyRange, key []byte) int {
		if r.upper == nil || bytes.Compare(r.upper, key) > 0 {
			return 1
		}
		return -1
	})
	return i
}

// covered reports whether a pending range of the transaction contains key.
func (s *StoreBuffer) covered(key []byte) bool {
	i := s.coverIndex(key)
	return i < len(s.cover) && bytes.Compare(s.cover[i].lower, key) <= 0
}

// contains reports whether one cover interval contains all of [lower, upper).
func (s *StoreBuffer) contains(lower, upper []byte) bool {
	i := s.coverIndex(lower)
	if i == len(s.cover) || bytes.Compare(s.cover[i].lower, lower) > 0 {
		return false
	}
	c := s.cover[i].upper
	return c == nil || upper != nil && bytes.Compare(upper, c) <= 0
}

// addCover merges r into cover, joining the intervals it overlaps or
// touches, so that cover stays sorted and disjoint and gap can step from one
// interval's end to a key outside every interval.
func (s *StoreBuffer) addCover(r keyRange) {
	i := s.coverIndex(r.lower)
	if i > 0 && bytes.Equal(s.cover[i-1].upper, r.lower) {
		i-- // touches r from below
	}
	j := len(s.cover)
	if r.upper != nil {
		j, _ = slices.BinarySearchFunc(s.cover, r.upper, func(c keyRange, upper []byte) int {
			if bytes.Compare(c.lower, upper) > 0 {
				return 1
			}
			return -1
		})
	}
	// cover[i:j] overlap or touch r.
	if i < j {
		if bytes.Compare(s.cover[i].lower, r.lower) < 0 {
			r.lower = s.cover[i].lower
		}
		if last := s.cover[j-1].upper; r.upper != nil && (last == nil || bytes.Compare(last, r.upper) > 0) {
			r.upper = last
		}
	}
	s.cover = slices.Replace(s.cover, i, j, r)
}

// gap returns the first part of [lo, upper) that no pending range covers,
// or ok false when there is none. Without pending ranges it is [lo, upper).
func (s *StoreBuffer) gap(lo, upper []byte) (gapLo, gapHi []byte, ok bool) {
	i := s.coverIndex(lo)
	if i < len(s.cover) && bytes.Compare(s.cover[i].lower, lo) <= 0 {
		if s.cover[i].upper == nil {
			return nil, nil, false
		}
		lo = s.cover[i].upper
		i++
	}
	hi := upper
	if i < len(s.cover) && (upper == nil || bytes.Compare(s.cover[i].lower, upper) < 0) {
		hi = s.cover[i].lower
	}
	if hi != nil && bytes.Compare(lo, hi) >= 0 {
		return nil, nil, false
	}
	return lo, hi, true
}

// Scan calls fn for each key of the merged view (buffer over DB) in
// [lower, upper), in ascending byte order; a nil upper means no upper bound.
// Buffered puts override the DB's values, and buffered deletes and pending
// range deletes hide its keys. The slices passed to fn are valid only during
// the call and must not be modified. An error from fn stops the scan and is
// returned as is.
//
// fn may write to the store: the buffered keys the scan may visit are those
// in range when it starts (a key fn adds is not visited), each passed with its
// value when the scan reaches it, so a key fn deleted before is skipped and
// one fn rewrote shows its new value; the DB side follows the DB's own rules.
// A range that fn deletes hides the keys the scan has not reached yet.
func (s *StoreBuffer) Scan(lower, upper []byte, fn func(key, value []byte) error) error {
	// Snapshot the buffered keys in range, because fn may write (adding
	// dirty keys, or deleting a range of them).
	var pending []int
	if s.scanning == 0 {
		pending = s.dirtyRange(s.scratch[:0], lower, upper)
		defer func() { s.scratch = pending[:0] }()
	} else {
		pending = s.dirtyRange(nil, lower, upper)
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
			if i >= s.slots.Len() || s.slots.At(i).gen != gen {
				continue // fn called Reset: the slot is no longer dirty
			}
			sl := s.slots.At(i)
			c := 0
			if limit != nil {
				c = bytes.Compare(sl.key, limit)
				if c > 0 {
					return false, nil
				}
			}
			key, value, deleted := clip(sl.key), clip(sl.value), sl.deleted
			if !deleted {
				s.visiting = i + 1
				err := fn(key, value)
				s.visiting = 0
				if err != nil {
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
		visit := func(key, value []byte) error {
			shadowed, err := emitBuffered(key)
			// The cover test catches ranges that fn deleted during this
			// DB scan; the gaps below already skip the earlier ones.
			if err == nil && !shadowed && (len(s.cover) == 0 || !s.covered(key)) {
				err = fn(key, value)
			}
			fnErr = err
			return err
		}
		// Scan the DB only where no pending range hides it: the keys of
		// an expired segment stay in the DB until the commit, and going
		// through them to drop each would cost as much as reading them.
		// Each gap is recomputed from the cover as it is now.
		for lo := lower; ; {
			gapLo, gapHi, ok := s.gap(lo, upper)
			if !ok {
				break
			}
			if err := s.buf.db.Scan(s.name, gapLo, gapHi, visit); err != nil {
				if fnErr != nil && err == fnErr {
					return err
				}
				return fmt.Errorf("state: scan store %q: %w: %w", s.name, ErrRead, err)
			}
			if gapHi == nil || upper != nil && bytes.Compare(gapHi, upper) >= 0 {
				break
			}
			lo = gapHi
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

// slot returns the slot of key, creating it with room for a value of
// valueLen bytes if needed, and marks it dirty in the current transaction.
func (s *StoreBuffer) slot(key []byte, valueLen int) *slot {
	i, known := s.lookup(key)
	if !known {
		i = s.newSlot(key, valueLen)
	}
	sl := s.slots.At(i)
	if sl.gen != s.buf.gen {
		sl.gen = s.buf.gen
		// A cached miss stays one until written (every write goes
		// through the slot); a key without a slot is a miss while the
		// store is known whole.
		sl.absent = sl.clean && sl.deleted || !known && (s.complete || s.buf.db == nil)
		s.dirty = append(s.dirty, i)
		s.byKeyOK = false
		s.buf.dirty++
		// Keys written in ascending order (a common pattern) keep the
		// dirty list sorted, and Writes and Scan skip the sort.
		if n := len(s.dirty); s.sorted && n > 1 && bytes.Compare(s.slots.At(s.dirty[n-2]).key, sl.key) > 0 {
			s.sorted = false
		}
		if s.indexed {
			s.ordered.ReplaceOrInsert(i)
		}
	}
	return sl
}

// lookup is the index's entry for key, answered from last or missed when
// the last Get was of key.
func (s *StoreBuffer) lookup(key []byte) (int, bool) {
	if l := s.last - 1; l >= 0 {
		// A free slot's key is nil, a live slot's never (newSlot).
		if k := s.slots.At(l).key; k != nil && bytes.Equal(k, key) {
			return l, true
		}
	}
	if s.missedOK && bytes.Equal(s.missed, key) {
		return 0, false
	}
	i, ok := s.index[string(key)]
	return i, ok
}

// newSlot adds a slot for key, neither dirty nor clean, with room for a
// value of valueLen bytes right after the key, and returns its index. A
// read of a key the CPU cache no longer holds then finds the value in the
// memory that the key's comparison brought in: at a million keys, a
// lookup's misses were a tenth of the ledger's CPU. (A value that outgrows
// its room moves to memory of its own; the room stays with the key,
// uncounted.)
func (s *StoreBuffer) newSlot(key []byte, valueLen int) int {
	// Never nil, even for "": that keeps "" distinct from a missing key in
	// Writes, and from a free slot.
	kv := append(make([]byte, 0, len(key)+valueLen), key...)
	k := kv[:len(key):len(key)]
	sl := slot{key: k, value: kv[len(key):len(key)]}
	var i int
	if n := len(s.free); n > 0 {
		i = s.free[n-1]
		s.free = s.free[:n-1]
		*s.slots.At(i) = sl
	} else {
		i = s.slots.Append(sl)
	}
	// The map's key shares the slot's key bytes, which nothing modifies:
	// a second copy of every key would cost as much as the key again.
	s.index[unsafe.String(unsafe.SliceData(k), len(k))] = i
	s.missedOK = false // it may have been key
	s.retained += slotOverhead + len(k) + valueLen
	return i
}

// evict empties slots until the store holds at most target bytes, in the
// order of a CLOCK sweep: a slot read since the hand last passed it (ref)
// gets a second chance, so keys read in every transaction stay and keys
// seen once go first. It runs between transactions, when no slot
// is dirty. Pebble's block cache and Kafka Streams' record cache evict by
// the same kind of approximation of least-recently-used.
func (s *StoreBuffer) evict(target int) {
	var evicted int64
	defer func() { s.buf.budget.evictions.Add(evicted) }()
	for steps := 2 * s.slots.Len(); s.retained > target && steps > 0; steps-- {
		if s.hand >= s.slots.Len() {
			s.hand = 0
		}
		i := s.hand
		s.hand++
		switch sl := s.slots.At(i); {
		case sl.key == nil: // free already
		case sl.ref:
			sl.ref = false
		default:
			if !sl.clean || !sl.deleted {
				s.complete = false // the DB may hold this key
			}
			s.freeSlot(i)
			evicted++
		}
	}
}

// freeSlot empties slot i, which is not dirty, and lists it for reuse.
func (s *StoreBuffer) freeSlot(i int) {
	sl := s.slots.At(i)
	delete(s.index, string(sl.key))
	s.retained -= slotOverhead + len(sl.key) + cap(sl.value)
	*sl = slot{}
	s.free = append(s.free, i)
}

// account brings the budget's figures up to date with the store's.
func (s *StoreBuffer) account() {
	b := s.buf.budget
	if d := s.retained - s.reported; d != 0 {
		b.used.Add(int64(d))
		s.reported = s.retained
	}
	if s.hits != 0 || s.misses != 0 {
		b.hits.Add(s.hits)
		b.misses.Add(s.misses)
		s.hits, s.misses = 0, 0
	}
}

// drop forgets every slot and gives their memory back to the budget.
func (s *StoreBuffer) drop() {
	s.retained = 0
	s.account()
	clear(s.index)
	s.slots, s.free, s.dirty, s.hand, s.last = chunked.List[slot]{}, nil, nil, 0, 0
	s.byKey, s.byKeyOK = nil, false
	clear(s.expired)
	s.expired = s.expired[:0]
}

// dirtyRange appends the dirty slots with keys in [lower, upper) to dst, in
// key order.
func (s *StoreBuffer) dirtyRange(dst []int, lower, upper []byte) []int {
	if s.sorted && !s.indexed {
		return append(dst, s.sortedRange(s.dirty, lower, upper)...)
	}
	if !s.indexed && !s.byKeyMade {
		s.byKey = append(s.byKey[:0], s.dirty...)
		s.sorter.sort(s.byKey, s.slotKey)
		s.byKeyOK, s.byKeyMade = true, true
	}
	if !s.indexed && s.byKeyOK {
		return append(dst, s.sortedRange(s.byKey, lower, upper)...)
	}
	if !s.indexed {
		if s.ordered == nil {
			s.ordered = btree.NewG(32, func(a, b int) bool { return bytes.Compare(s.keyOf(a), s.keyOf(b)) < 0 })
		}
		for _, i := range s.dirty {
			s.ordered.ReplaceOrInsert(i)
		}
		s.indexed = true
	}
	s.probe = lower
	visit := func(i int) bool {
		if upper != nil && bytes.Compare(s.slots.At(i).key, upper) >= 0 {
			return false
		}
		dst = append(dst, i)
		return true
	}
	s.ordered.AscendGreaterOrEqual(-1, visit)
	s.probe = nil
	return dst
}

// sortedRange is the part of ids, slots in key order, whose keys are in
// [lower, upper).
func (s *StoreBuffer) sortedRange(ids []int, lower, upper []byte) []int {
	lo, _ := slices.BinarySearchFunc(ids, lower, s.cmpSlot)
	hi := len(ids)
	if upper != nil {
		hi, _ = slices.BinarySearchFunc(ids, upper, s.cmpSlot)
	}
	if hi < lo {
		hi = lo // upper <= lower: an empty range
	}
	return ids[lo:hi]
}

// keyOf is slot i's key, or the probe for -1.
func (s *StoreBuffer) keyOf(i int) []byte {
	if i < 0 {
		return s.probe
	}
	return s.slots.At(i).key
}

// settleExpired forgets the remembered keys that committed range deletes
// removed, which keeps the cache equal to the DB, and forgets the ranges:
// one walk over the slots for maxExpired committed ranges. The keys are
// forgotten rather than kept as cached misses: a range delete expires
// window segments, whose keys are not read again, and keeping them filled
// the cache of a join's stores with a key per record (17 of q4's 40 MB at
// 500k events through eddytest). A store known whole stays so: the DB no
// longer holds these keys. It runs as a transaction ends, when no slot is
// dirty but the ones it has just made clean, which are not stale.
func (s *StoreBuffer) settleExpired() {
	for i := range s.slots.Len() {
		if sl := s.slots.At(i); sl.clean && s.stale(sl) {
			s.freeSlot(i)
		}
	}
	clear(s.expired)
	s.expired = s.expired[:0]
}

func (s *StoreBuffer) slotKey(i int) []byte { return s.slots.At(i).key }

func (s *StoreBuffer) cmpSlot(i int, key []byte) int { return bytes.Compare(s.slots.At(i).key, key) }

func (s *StoreBuffer) reset(committed bool) {
	if len(s.cover) != 0 {
		if committed {
			// The DB applied the ranges, then the writes: every key in a
			// range that the transaction did not write is gone. Get
			// learns it from expired until the ranges are settled.
			for _, r := range s.cover {
				s.expired = append(s.expired, expiredRange{keyRange: r, gen: s.buf.gen})
			}
		}
		clear(s.ranges) // the bounds live on in expired, never modified
		s.ranges = s.ranges[:0]
		clear(s.cover)
		s.cover = s.cover[:0]
	}
	if committed {
		for _, i := range s.discarded {
			if sl := s.slots.At(i); sl.gen != s.buf.gen { // not written again after the range
				sl.clean, sl.deleted, sl.since = true, true, s.buf.gen+1
				sl.value = sl.value[:0]
			}
		}
	}
	s.discarded = s.discarded[:0]
	for _, i := range s.dirty {
		// Committed: the slot holds what the DB now holds. Aborted: it
		// holds a value that never committed.
		sl := s.slots.At(i)
		sl.clean, sl.since = committed, s.buf.gen+1
	}
	if committed && len(s.expired) >= maxExpired {
		s.settleExpired()
	}
	s.dirty = s.dirty[:0]
	s.sorted = true
	s.byKey, s.byKeyOK, s.byKeyMade = s.byKey[:0], false, false
	if s.indexed {
		s.ordered.Clear(true) // keeps its nodes for the next transaction
		s.indexed = false
	}
	s.account()
	if b := s.buf.budget; b.used.Load() > b.limit {
		// The caches together hold more than the budget: this store
		// shrinks to its part of 90% of it, in proportion to what it
		// holds now, so the stores that hold most give most back and the
		// budget is not crossed again at every commit. Every store that
		// ends a transaction while the budget is over does the same.
		used := b.used.Load()
		target := int(float64(s.retained) * 0.9 * float64(b.limit) / float64(max(used, 1)))
		s.evict(target)
		s.account()
		// Stores that end no transaction (an idle task's) keep their
		// part; the one that ends one then gives what it must for the
		// budget to hold.
		if over := b.used.Load() - b.limit; over > 0 {
			s.evict(s.retained - int(over))
			s.account()
		}
	}
}

// clip limits b's capacity to its length, so a caller appending to a slice
// it got from the buffer reallocates instead of overwriting buffer memory.
func clip(b []byte) []byte { return b[:len(b):len(b)] }
