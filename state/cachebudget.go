package state

import "sync/atomic"

// CacheBudget is the memory that write buffers share for their caches of
// committed values. An App gives one to every task, so that the caches of
// all its tasks and stores together stay within one figure however many
// keys the state holds (docs/design.md §2.1): a store buffer that ends a
// transaction while the budget is used up gives back memory in proportion
// to what it holds, evicting the keys least recently used (CLOCK order),
// so hot keys stay cached and the process does not grow with the state.
//
// The figures are approximations of the Go heap the caches hold: a key's
// bytes, its value's capacity and a fixed overhead per key for the slot
// and its map entry. A store's figure is brought up to date when its
// transaction ends; the open transaction's writes are never evicted (the
// transaction needs them), so one transaction larger than the budget is
// kept whole and counted when it ends, when its store gives back what the
// budget needs.
type CacheBudget struct {
	limit int64
	used  atomic.Int64
	// Counted by the store buffers at the end of each transaction.
	hits, misses, evictions atomic.Int64
}

// NewCacheBudget returns a budget of limit bytes (at least 1).
func NewCacheBudget(limit int64) *CacheBudget {
	return &CacheBudget{limit: max(limit, 1)}
}

// DefaultBufferCache is the budget of a Buffer made without one: the
// caches of its stores share it.
const DefaultBufferCache = 16 << 20

// CacheStats are a CacheBudget's figures.
type CacheStats struct {
	// Limit is the budget; Used what the caches hold now (it can exceed
	// Limit until the transactions in progress end).
	Limit, Used int64
	// Hits are reads that the caches answered (a cached miss included),
	// Misses reads that went to the database, Evictions keys dropped to
	// stay within the budget: all since the budget was made.
	Hits, Misses, Evictions int64
}

// Stats returns the budget's figures. It may be called from any
// goroutine.
func (c *CacheBudget) Stats() CacheStats {
	return CacheStats{Limit: c.limit, Used: c.used.Load(), Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load()}
}
