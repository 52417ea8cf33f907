package state

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
)

// keySorter sorts slot indexes by their keys, for a Scan over a
// transaction's unsorted dirty keys. A comparison sort over the indexes
// reads two keys from wherever they live at every comparison: sorting the
// million records a Nexmark q5 join stores per window took 13 % of the
// query's CPU, and keys that share long prefixes (a join key, then a
// timestamp, then the record) make every comparison walk the prefix.
// keySorter is a most-significant-digit radix sort whose digits are 7
// bytes of key and a length: each level reads every key of a run once,
// into an array of (digit, index) pairs sorted as integers, and only the
// runs that tie go on to the next 7 bytes (the abbreviated keys of
// PostgreSQL's and DuckDB's sorts, applied level by level).
type keySorter struct {
	ents []keyDigit
}

type keyDigit struct {
	digit uint64
	id    int
}

const (
	digitBytes = 7  // key bytes per digit; the eighth byte is their count
	smallRun   = 32 // a run this short is left to a comparison sort
	keptDigits = 1 << 12
)

// sort sorts ids by key(id), ascending as bytes.Compare orders them. The
// keys must be distinct.
func (k *keySorter) sort(ids []int, key func(int) []byte) {
	k.ents = slices.Grow(k.ents[:0], len(ids))[:len(ids)]
	for i, id := range ids {
		k.ents[i] = keyDigit{id: id}
	}
	sortRun(k.ents, 0, key)
	for i := range ids {
		ids[i] = k.ents[i].id
	}
	if cap(k.ents) > keptDigits {
		k.ents = nil // a transaction's million keys: not kept for the next
	}
}

// sortRun sorts ents, whose keys are equal in their first depth bytes.
func sortRun(ents []keyDigit, depth int, key func(int) []byte) {
	if len(ents) <= smallRun {
		slices.SortFunc(ents, func(a, b keyDigit) int { return bytes.Compare(key(a.id)[depth:], key(b.id)[depth:]) })
		return
	}
	for i := range ents {
		ents[i].digit = digitAt(key(ents[i].id), depth)
	}
	slices.SortFunc(ents, func(a, b keyDigit) int { return cmp.Compare(a.digit, b.digit) })
	for lo := 0; lo < len(ents); {
		hi := lo + 1
		for hi < len(ents) && ents[hi].digit == ents[lo].digit {
			hi++
		}
		// Equal digits of keys with fewer than 7 bytes left would be
		// equal keys: only full digits tie.
		if hi-lo > 1 && ents[lo].digit&0xff == digitBytes {
			sortRun(ents[lo:hi], depth+digitBytes, key)
		}
		lo = hi
	}
}

// digitAt is the digit of b at depth: its next (up to) 7 bytes, zero
// padded, then how many there were. A key that ends sorts before its
// extensions: "ab" (…0 0 2) < "ab\x00" (…0 0 3) < "ab\x00\x01".
func digitAt(b []byte, depth int) uint64 {
	rest := b[depth:]
	if len(rest) >= 8 {
		return binary.BigEndian.Uint64(rest)&^0xff | digitBytes
	}
	var d uint64
	n := min(len(rest), digitBytes)
	for i := range digitBytes {
		d <<= 8
		if i < n {
			d |= uint64(rest[i])
		}
	}
	return d<<8 | uint64(n)
}
