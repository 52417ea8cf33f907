package chunked

import "testing"

// TestList: elements keep their index and contents across chunk
// boundaries, growing never moves one, and Reset empties the list for
// reuse.
func TestList(t *testing.T) {
	var l List[int]
	const n = 3*size + 17
	var first *int
	for round := range 2 {
		for i := range n {
			if got := l.Append(i * 10); got != i {
				t.Fatalf("round %d: Append %d returned index %d", round, i, got)
			}
			if i == size {
				first = l.At(size)
			}
		}
		if l.Len() != n {
			t.Fatalf("Len = %d, want %d", l.Len(), n)
		}
		for i := range n {
			if v := *l.At(i); v != i*10 {
				t.Fatalf("element %d holds %d", i, v)
			}
		}
		if first != l.At(size) {
			t.Error("an element moved when the list grew")
		}
		l.Reset()
		if l.Len() != 0 || len(l.chunks) != 1 || len(l.chunks[0]) != 0 {
			t.Fatalf("after Reset: Len %d, %d chunks", l.Len(), len(l.chunks))
		}
	}
}
