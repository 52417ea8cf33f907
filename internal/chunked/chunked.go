// Package chunked is a list that grows by fixed-size chunks: appending
// never moves what is there, so a list of millions of elements is not
// copied at every doubling (a quarter of a large-state Nexmark query's CPU
// went to such copies of a store buffer's slots and of the in-process
// runtime's queue), and a pointer to an element stays valid.
package chunked

const (
	shift = 12
	size  = 1 << shift // elements per chunk
)

// List is an append-only list of T, addressed by index. The zero List is
// empty and ready to use.
type List[T any] struct {
	chunks [][]T
	n      int
}

// Len is the number of elements.
func (l *List[T]) Len() int { return l.n }

// At returns element i (0 ≤ i < Len).
func (l *List[T]) At(i int) *T { return &l.chunks[i>>shift][i&(size-1)] }

// Append adds v and returns its index.
func (l *List[T]) Append(v T) int {
	i := l.n
	c := i >> shift
	if c == len(l.chunks) {
		// The first chunk starts small and grows as a slice does (to a
		// whole chunk at most), so that a short list holds no chunk.
		l.chunks = append(l.chunks, make([]T, 0, min(size, max(4, i))))
	}
	l.chunks[c] = append(l.chunks[c], v)
	l.n++
	return i
}

// Reset empties the list, zeroing what it held so that the garbage
// collector may free what its elements pointed to; it keeps the first
// chunk for reuse.
func (l *List[T]) Reset() {
	for i, c := range l.chunks {
		clear(c)
		l.chunks[i] = c[:0]
	}
	clear(l.chunks[min(1, len(l.chunks)):])
	l.chunks = l.chunks[:min(1, len(l.chunks))]
	l.n = 0
}
