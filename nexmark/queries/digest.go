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
	writeRecord(&h, key, value)
	d.count(group, h.Sum64())
}

// addStamped counts the record (key, value, ts) in the group of its second
// of event time: for results with no better group, the seconds still say
// where a difference lies.
func (d *digest) addStamped(key, value []byte, ts int64) {
	var h maphash.Hash
	h.SetSeed(d.seed)
	writeRecord(&h, key, value)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(ts))
	h.Write(n[:])
	d.count(ts-ts%1000, h.Sum64())
}

func writeRecord(h *maphash.Hash, key, value []byte) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(key)))
	h.Write(n[:]) // the split between key and value is part of the record
	h.Write(key)
	h.Write(value)
}

func (d *digest) count(group int64, hash uint64) {
	s := d.groups[group]
	s.n++
	s.sum += hash
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

// appendCheck is the Check of an append-only result: Add digests the
// output, Verify digests the reference's records and compares.
type appendCheck struct {
	got, want *digest
	// reference emits the reference's records, encoded as the query
	// writes them, to add.
	reference func(add func(key, value []byte, ts int64))
}

func newAppendCheck(reference func(add func(key, value []byte, ts int64))) *appendCheck {
	seed := maphash.MakeSeed()
	return &appendCheck{got: newDigest(seed), want: newDigest(seed), reference: reference}
}

func (c *appendCheck) Add(key, value []byte, ts int64) { c.got.addStamped(key, value, ts) }

func (c *appendCheck) Verify() error {
	clear(c.want.groups)
	c.reference(c.want.addStamped)
	return compare(c.got, c.want, "second")
}

// lastValues is what a Check of an updating result keeps: the last value
// per key, for int64 keys (serde.Int64). A key of another length is
// counted and reported by err.
type lastValues struct {
	m       map[int64][]byte
	badKeys int
}

func newLastValues() *lastValues { return &lastValues{m: make(map[int64][]byte)} }

func (l *lastValues) add(key, value []byte) {
	if len(key) != 8 {
		l.badKeys++
		return
	}
	k := int64(binary.BigEndian.Uint64(key))
	l.m[k] = append(l.m[k][:0], value...)
}

func (l *lastValues) err() error {
	if l.badKeys > 0 {
		return fmt.Errorf("%d output records had a key that is not 8 bytes (serde.Int64)", l.badKeys)
	}
	return nil
}

// errDiffers starts the error of an updating result's Verify.
var errDiffers = errors.New("output differs from the reference")

// int64Key encodes k as serde.Int64 does (8 bytes, big-endian).
func int64Key(dst []byte, k int64) []byte { return binary.BigEndian.AppendUint64(dst, uint64(k)) }

// differs is the error of an updating result's Verify: errDiffers, the
// counts of keys (what names them: "auctions"), and the first five of
// diffs; nil when diffs is empty.
func differs(what string, got, want int, diffs []string) error {
	if len(diffs) == 0 {
		return nil
	}
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("… %d more", len(diffs)-5))
	}
	return fmt.Errorf("%w (%d %s, want %d):\n\t%s", errDiffers, got, what, want, strings.Join(diffs, "\n\t"))
}
