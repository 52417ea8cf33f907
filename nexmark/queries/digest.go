package queries

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
)

// digest is an order-independent summary of an append-only result: per
// group (a window start, a bidder: whatever localises a difference), the
// number of records and the sum of 64-bit hashes of their key and value
// bytes. Adding a record costs one hash and one map update, so it can run
// inside the measured process; a record dropped, duplicated or changed
// changes its group's count or sum (a collision that hides a change has
// probability about 2^-64).
type digest struct {
	seed   maphash.Seed
	groups map[int64]digestSum
}

type digestSum struct {
	n   int64
	sum uint64
}

func newDigest(seed maphash.Seed) *digest {
	return &digest{seed: seed, groups: make(map[int64]digestSum)}
}

// add counts the record (key, value) in group.
func (d *digest) add(group int64, key, value []byte) {
	var h maphash.Hash
	h.SetSeed(d.seed)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(key)))
	h.Write(n[:]) // the split between key and value is part of the record
	h.Write(key)
	h.Write(value)
	s := d.groups[group]
	s.n++
	s.sum += h.Sum64()
	d.groups[group] = s
}

// compare describes how got differs from want (the reference), naming up
// to five groups; what names the groups ("window", "bidder").
func compare(got, want *digest, what string) error {
	var gotN, wantN int64
	var diffs []int64
	for g, w := range want.groups {
		wantN += w.n
		if got.groups[g] != w {
			diffs = append(diffs, g)
		}
	}
	for g, s := range got.groups {
		gotN += s.n
		if _, ok := want.groups[g]; !ok {
			diffs = append(diffs, g)
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	slices.Sort(diffs)
	var b strings.Builder
	fmt.Fprintf(&b, "%d records, want %d; %d of %d %ss differ:", gotN, wantN, len(diffs), len(want.groups), what)
	for i, g := range diffs {
		if i == 5 {
			b.WriteString(" …")
			break
		}
		gs, ws := got.groups[g], want.groups[g]
		if gs.n == ws.n {
			fmt.Fprintf(&b, " %s %d: %d records, other contents;", what, g, gs.n)
		} else {
			fmt.Fprintf(&b, " %s %d: %d records, want %d;", what, g, gs.n, ws.n)
		}
	}
	return errors.New(strings.TrimSuffix(b.String(), ";"))
}

// windowStart is the start of the tumbling window of size ms that holds
// ts (ts ≥ 0, as event times are).
func windowStart(ts, size int64) int64 { return ts - ts%size }
