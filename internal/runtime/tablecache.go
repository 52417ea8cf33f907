package runtime

import "errors"

// TableCacheBudget is the memory that the table caches of one worker's
// tasks share (eddy.Config.TableCacheBytes divided among the workers, as
// Kafka Streams divides cache.max.bytes.buffering among its stream
// threads). A cache adds the bytes it holds and, while the budget is over,
// forwards its own oldest updates to give them back (Kafka Streams'
// ThreadCache evicts from the cache being written the same way). One
// worker's tasks run on its goroutine, so the budget takes no lock; it is
// not safe for concurrent use.
type TableCacheBudget struct {
	limit, used int64
	// suspended turns caching off until the next commit: a held update
	// failed downstream, and the records are processed again, uncached,
	// so that the failure meets the record that made it.
	suspended bool
}

// ErrHeldUpdate marks the failure of an operator downstream of a table
// cache while it forwarded a held update (at a commit, before a
// punctuator, or to make room). The record that made the update was
// processed earlier, perhaps in another poll, so no error policy can
// dead-letter or skip it: the worker aborts the transaction and processes
// its records again with caching suspended (Suspend), so that the same
// failure comes from the record that causes it, under the policies.
var ErrHeldUpdate = errors.New("eddy: a table update held in the table cache failed downstream")

// Suspend turns caching off (every update is forwarded at once) until
// Resume.
func (b *TableCacheBudget) Suspend() { b.suspended = true }

// Resume turns caching back on; the worker calls it once a transaction
// has committed.
func (b *TableCacheBudget) Resume() { b.suspended = false }

// Suspended reports whether caching is off for now.
func (b *TableCacheBudget) Suspended() bool { return b.suspended }

// NewTableCacheBudget returns a budget of limit bytes; limit must be
// positive (a disabled cache has no budget: nil).
func NewTableCacheBudget(limit int64) *TableCacheBudget {
	return &TableCacheBudget{limit: max(limit, 1)}
}

// Add adds n bytes (negative: gives them back).
func (b *TableCacheBudget) Add(n int64) { b.used += n }

// Over reports whether the caches hold more than the budget.
func (b *TableCacheBudget) Over() bool { return b.used > b.limit }

// Used is the bytes the caches hold.
func (b *TableCacheBudget) Used() int64 { return b.used }

// Limit is the budget's size in bytes.
func (b *TableCacheBudget) Limit() int64 { return b.limit }
