package state

import "testing"

// TestSlotArena: slots keep their index and their contents across chunk
// boundaries, and growing never moves a slot already there.
func TestSlotArena(t *testing.T) {
	var a slotArena
	const n = 3*slotChunk + 17
	var first *slot
	for i := range n {
		if got := a.append(slot{gen: uint64(i)}); got != i {
			t.Fatalf("append %d returned index %d", i, got)
		}
		if i == slotChunk {
			first = a.at(slotChunk)
		}
	}
	if a.n != n {
		t.Fatalf("n = %d, want %d", a.n, n)
	}
	for i := range n {
		if g := a.at(i).gen; g != uint64(i) {
			t.Fatalf("slot %d holds %d", i, g)
		}
	}
	if first != a.at(slotChunk) {
		t.Error("a slot moved when the arena grew")
	}
}
