package runtime

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
}

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
