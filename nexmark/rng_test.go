package nexmark

import "testing"

func TestRNGRanges(t *testing.T) {
	r := newRNG(1, eventSalt, 0)
	var hist [7]int
	for range 70_000 {
		hist[r.intN(7)]++
		if f := r.float64(); f < 0 || f >= 1 {
			t.Fatalf("float64 %v outside [0, 1)", f)
		}
	}
	for k, c := range hist {
		if c < 9_400 || c > 10_600 {
			t.Fatalf("intN(7) drew %d %d times of 70,000", k, c)
		}
	}
	if v := r.int64N(1); v != 0 {
		t.Fatalf("int64N(1) = %d", v)
	}
}

// TestRNGStreams checks that neighbouring indexes, seeds and salts start
// unrelated streams: the generator's determinism by index rests on it.
func TestRNGStreams(t *testing.T) {
	seen := map[uint64]bool{}
	for seed := range uint64(4) {
		for _, salt := range []uint64{eventSalt, channelSalt} {
			for i := range int64(1000) {
				r := newRNG(seed, salt, i)
				v := r.uint64()
				if seen[v] {
					t.Fatalf("seed %d salt %x index %d repeats a first draw", seed, salt, i)
				}
				seen[v] = true
			}
		}
	}
}
