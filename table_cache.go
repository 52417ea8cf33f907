package eddy

import (
	"fmt"
	"runtime/debug"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/state"
)

// tableCacheEntryOverhead is what a held update costs besides its encoded
// key and value: the entry, its index slot and the decoded record. A
// rough figure, as Kafka Streams' LRUCacheEntry overhead is: the budget
// bounds memory, it does not measure it.
const tableCacheEntryOverhead = 96

// tableCache holds a table operator's updates within a transaction and
// forwards only the latest per key (Kafka Streams' record cache,
// cache.max.bytes.buffering): the operator writes its store at once, so
// reads (joins, queries, the operator's next update) see every update;
// only its downstream sees fewer. Held updates are forwarded, in the order
// their keys were first held (Kafka Streams' dirty list), when the task
// flushes (a commit, a punctuation) and, oldest first, while the worker's
// budget is exceeded; an abort discards them (the transaction's records
// are processed again). With no budget (caching off) every update is
// forwarded at once.
//
// Only the latest record is kept, decoded: its key, value, timestamp and
// headers replace the earlier ones in place, so an update of a key already
// held allocates nothing. So is the input record's metadata (topic,
// partition, offset): downstream, RecordContext and ProcessorContext show
// the record that made the update, not the one being processed when it
// is forwarded, as Kafka Streams keeps a cache entry's record context.
type tableCache[K, V any] struct {
	b      *taskBuild
	out    *emitter[K, V]
	budget *runtime.TableCacheBudget
	// index maps an encoded key to its entry in entries; entries[:head]
	// were forwarded by eviction and are dead.
	index   map[string]int
	entries []tableCacheEntry[K, V]
	head    int
	// bytes is what this cache holds of the budget.
	bytes int64
	// source carries a held update's input metadata while it is
	// forwarded (taskBuild.current).
	source kgo.Record
}

type tableCacheEntry[K, V any] struct {
	key  string
	rec  Record[K, V]
	size int64
	src  sourceMeta
}

// sourceMeta is the metadata of the input record that made an update;
// none (a punctuator's update) when !ok.
type sourceMeta struct {
	topic     string
	partition int32
	offset    int64
	ok        bool
}

func (b *taskBuild) sourceMeta() sourceMeta {
	if r := b.current; r != nil {
		return sourceMeta{topic: r.Topic, partition: r.Partition, offset: r.Offset, ok: true}
	}
	return sourceMeta{}
}

// newTableCache returns the output of a table operator of b whose updates
// go to out: through a cache when the task's worker has a table cache
// budget, straight to out otherwise.
func newTableCache[K, V any](b *taskBuild, out *emitter[K, V]) *tableCache[K, V] {
	c := &tableCache[K, V]{b: b, out: out, budget: b.tc.TableCache()}
	if c.budget != nil {
		c.index = make(map[string]int)
		b.caches = append(b.caches, c)
	}
	return c
}

// update forwards r, the update of the key encoded as key (whose encoded
// value is valueLen bytes, 0 for a tombstone), or holds it in place of
// the key's held update. key is only read during the call.
func (c *tableCache[K, V]) update(key []byte, valueLen int, r Record[K, V]) error {
	if c.budget == nil || c.budget.Suspended() {
		return c.out.emit(r)
	}
	size := int64(len(key)+valueLen) + tableCacheEntryOverhead
	if i, ok := c.index[string(key)]; ok { // the conversion does not allocate
		e := &c.entries[i]
		c.b.cacheCollapsed++
		c.resize(size - e.size)
		e.rec, e.size, e.src = r, size, c.b.sourceMeta()
	} else {
		c.index[string(key)] = len(c.entries)
		c.entries = append(c.entries, tableCacheEntry[K, V]{key: string(key), rec: r, size: size, src: c.b.sourceMeta()})
		c.resize(size)
	}
	for c.budget.Over() && c.head < len(c.entries) {
		if err := c.evict(); err != nil {
			return err
		}
	}
	return nil
}

func (c *tableCache[K, V]) resize(n int64) {
	c.bytes += n
	c.budget.Add(n)
}

// evict forwards the oldest held update. A failure of what it runs (an
// error or a panic of an operator downstream, not the state's) is marked
// runtime.ErrHeldUpdate: it is not the fault of the record being
// processed, if any, and the worker processes the transaction again
// uncached to find the record it is.
func (c *tableCache[K, V]) evict() (err error) {
	defer func() {
		if p := recover(); p != nil {
			if _, fatal := p.(state.Fatal); fatal {
				panic(p) // the store's: crash, as processRecord does
			}
			// The stack goes to the log, as processRecord's does: the
			// uncached reprocessing may not fail the same way.
			c.b.tc.Logger().Error("panic while forwarding a held table update", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = fmt.Errorf("eddy: panic: %v", p)
		}
		if err != nil && !notTheRecords(err) {
			err = fmt.Errorf("%w: %w", runtime.ErrHeldUpdate, err)
		}
	}()
	e := &c.entries[c.head]
	rec, src := e.rec, e.src
	delete(c.index, e.key)
	c.resize(-e.size)
	*e = tableCacheEntry[K, V]{} // drop the references
	c.head++
	if c.head == len(c.entries) {
		c.entries, c.head = c.entries[:0], 0
	} else if c.head >= 1024 && c.head*2 >= len(c.entries) {
		c.compact()
	}
	c.b.cacheForwarded++
	current, held := c.b.current, c.b.currentHeld
	defer func() { c.b.current, c.b.currentHeld = current, held }()
	c.b.current, c.b.currentHeld = nil, true
	if src.ok {
		c.source.Topic, c.source.Partition, c.source.Offset = src.topic, src.partition, src.offset
		c.b.current = &c.source
	}
	return c.out.emit(rec)
}

// compact moves the live entries to the front, so that a cache that keeps
// evicting does not grow its slice without end.
func (c *tableCache[K, V]) compact() {
	n := copy(c.entries, c.entries[c.head:])
	clear(c.entries[n:])
	c.entries, c.head = c.entries[:n], 0
	for i := range c.entries {
		c.index[c.entries[i].key] = i
	}
}

// flush forwards every held update, in the order their keys were first
// held.
func (c *tableCache[K, V]) flush() error {
	for c.head < len(c.entries) {
		// Forwarding may run other operators of the task, never this
		// one again (a sub-topology has no loop), so entries only
		// shrink here.
		if err := c.evict(); err != nil {
			return err
		}
	}
	return nil
}

// discard drops every held update.
func (c *tableCache[K, V]) discard() {
	clear(c.index)
	clear(c.entries)
	c.entries, c.head = c.entries[:0], 0
	c.budget.Add(-c.bytes)
	c.bytes = 0
}

// heldUpdates is a tableCache of any type, as the task holds its caches.
type heldUpdates interface {
	flush() error
	discard()
}

// Flush forwards the updates the task's table caches hold (see
// runtime.TaskFlusher), in node order: a cache's updates may fill the
// caches of tables downstream of it, which come later.
func (b *taskBuild) Flush() error {
	for _, c := range b.caches {
		if err := c.flush(); err != nil {
			return err
		}
	}
	return nil
}

// Discard drops the updates the task's table caches hold and the
// transactional sinks' open transactions: their Kafka transaction
// aborted.
func (b *taskBuild) Discard() {
	for _, c := range b.caches {
		c.discard()
	}
	for _, p := range b.transactional {
		p.abort()
	}
}

// TableCacheForwarded is how many updates the task's table caches
// forwarded since it opened (those of aborted transactions too).
func (b *taskBuild) TableCacheForwarded() int64 { return b.cacheForwarded }

// TableCacheCollapsed is how many updates the task's table caches
// replaced by a later update of their key, never forwarding them, since
// it opened.
func (b *taskBuild) TableCacheCollapsed() int64 { return b.cacheCollapsed }
