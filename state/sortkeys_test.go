package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestKeySorter sorts random distinct keys as bytes.Compare orders them:
// keys of every length from 0 (one ends inside a digit, at its edge, or
// is a prefix of another), sharing prefixes longer than a digit, with
// zero and 0xff bytes where a padded digit could confuse them, in runs
// above and below the size left to a comparison sort.
func TestKeySorter(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	alphabet := []byte{0, 1, 0x7f, 0xfe, 0xff}
	var k keySorter
	for round := range 300 {
		n := rng.IntN(3000)
		prefix := make([]byte, rng.IntN(20))
		for i := range prefix {
			prefix[i] = alphabet[rng.IntN(len(alphabet))]
		}
		seen := map[string]bool{}
		var keys [][]byte
		for len(keys) < n {
			b := slices.Clone(prefix[:rng.IntN(len(prefix)+1)])
			for range rng.IntN(18) {
				b = append(b, alphabet[rng.IntN(len(alphabet))])
			}
			if !seen[string(b)] {
				seen[string(b)] = true
				keys = append(keys, b)
			}
		}
		ids := make([]int, len(keys))
		for i := range ids {
			ids[i] = i
		}
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		k.sort(ids, func(i int) []byte { return keys[i] })
		for i := 1; i < len(ids); i++ {
			if bytes.Compare(keys[ids[i-1]], keys[ids[i]]) >= 0 {
				t.Fatalf("round %d (%d keys): %s before %s", round, n, fmt.Sprintf("%x", keys[ids[i-1]]), fmt.Sprintf("%x", keys[ids[i]]))
			}
		}
		for i, id := range slices.Sorted(slices.Values(ids)) {
			if id != i {
				t.Fatalf("round %d: the sorted ids are not a permutation of the keys", round)
			}
		}
	}
}

func TestDigitAt(t *testing.T) {
	for _, c := range []struct {
		b    string
		want uint64
	}{
		{"", 0},
		{"ab", 0x6162_0000_0000_0002},
		{"ab\x00", 0x6162_0000_0000_0003},
		{"abcdefg", 0x6162_6364_6566_6707},
		{"abcdefgh", 0x6162_6364_6566_6707},
		{"abcdefghij", 0x6162_6364_6566_6707},
	} {
		if got := digitAt([]byte(c.b), 0); got != c.want {
			t.Errorf("digitAt(%q) = %#x, want %#x", c.b, got, c.want)
		}
	}
}

// BenchmarkKeySorter sorts a million keys shaped as a regular join's
// stored records (a length and an 8-byte join key, a shared timestamp,
// two varints), the radix sort against a comparison sort of the indexes.
func BenchmarkKeySorter(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([][]byte, 1_000_000)
	for i := range keys {
		k := []byte{8, 0, 0, 1, 0x8c, 0, 0, 0, byte(i % 5), 0x80, 0, 1, 0x8c, 0, 0, 0x27, 0x0f}
		keys[i] = binary.AppendUvarint(binary.AppendUvarint(k, uint64(rng.IntN(1<<22))), uint64(i))
	}
	ids := make([]int, len(keys))
	key := func(i int) []byte { return keys[i] }
	shuffle := func() {
		for i := range ids {
			ids[i] = i
		}
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	}
	b.Run("radix", func(b *testing.B) {
		var k keySorter
		for b.Loop() {
			b.StopTimer()
			shuffle()
			b.StartTimer()
			k.sort(ids, key)
		}
	})
	b.Run("compare", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			shuffle()
			b.StartTimer()
			slices.SortFunc(ids, func(x, y int) int { return bytes.Compare(keys[x], keys[y]) })
		}
	})
}
