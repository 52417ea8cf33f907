package queries

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
)

// digest summarises an append-only result without keeping it: per second
// of output event time, the number of records and the sum (mod 2^64) of a
// 64-bit hash of each record's key, value and timestamp. The sum does not
// depend on the order of the records, so the query's output and the
// reference can be compared however the query interleaved its work; one
// record more, less or different changes its second's count or sum (but
// for a 2^-64 chance), and the seconds say where.
type digest struct {
	seed maphash.Seed
	// base is the start of bucket 0, a little before the generator's
	// BaseTime (delayed events lie before it); earlier timestamps go to
	// bucket 0 too.
	base    int64
	buckets []bucket
	scratch [8]byte
}

type bucket struct {
	n   int64
	sum uint64
}

// digestSlack is how far before the generator's BaseTime bucket 0 starts:
// more than any delay.
const digestSlack = 60_000

func newDigest(seed maphash.Seed, baseTime int64) *digest {
	return &digest{seed: seed, base: baseTime - digestSlack}
}

func (d *digest) add(key, value []byte, ts int64) {
	var h maphash.Hash
	h.SetSeed(d.seed)
	// The key's length frames it, so (key, value) pairs that concatenate
	// to the same bytes still differ.
	binary.BigEndian.PutUint64(d.scratch[:], uint64(len(key)))
	h.Write(d.scratch[:])
	h.Write(key)
	h.Write(value)
	binary.BigEndian.PutUint64(d.scratch[:], uint64(ts))
	h.Write(d.scratch[:])
	i := max((ts-d.base)/1000, 0)
	for int64(len(d.buckets)) <= i {
		d.buckets = append(d.buckets, bucket{})
	}
	b := &d.buckets[i]
	b.n++
	b.sum += h.Sum64()
}

// total is the number of records added.
func (d *digest) total() int64 {
	var n int64
	for _, b := range d.buckets {
		n += b.n
	}
	return n
}

// diff describes how got differs from want: the totals and up to five
// seconds whose records differ; nil if they are equal.
func (want *digest) diff(got *digest) error {
	var lines []string
	for i := range max(len(got.buckets), len(want.buckets)) {
		var g, w bucket
		if i < len(got.buckets) {
			g = got.buckets[i]
		}
		if i < len(want.buckets) {
			w = want.buckets[i]
		}
		if g == w {
			continue
		}
		if len(lines) == 5 {
			lines = append(lines, "…")
			break
		}
		from := want.base + int64(i)*1000
		what := "different records"
		if g.n != w.n {
			what = fmt.Sprintf("%d records, want %d", g.n, w.n)
		}
		lines = append(lines, fmt.Sprintf("event time [%d, %d): %s", from, from+1000, what))
	}
	if len(lines) == 0 {
		return nil
	}
	return fmt.Errorf("output differs from the reference (%d records, want %d):\n\t%s",
		got.total(), want.total(), strings.Join(lines, "\n\t"))
}

// appendCheck is the Check of an append-only result: Add digests the
// output, Verify digests the reference's records and compares.
type appendCheck struct {
	got, want *digest
	// reference emits the reference's records, encoded as the query
	// writes them, to add.
	reference func(add func(key, value []byte, ts int64))
}

func newAppendCheck(baseTime int64, reference func(add func(key, value []byte, ts int64))) *appendCheck {
	seed := maphash.MakeSeed()
	return &appendCheck{got: newDigest(seed, baseTime), want: newDigest(seed, baseTime), reference: reference}
}

func (c *appendCheck) Add(key, value []byte, ts int64) { c.got.add(key, value, ts) }

func (c *appendCheck) Verify() error {
	c.want.buckets = c.want.buckets[:0]
	c.reference(c.want.add)
	return c.want.diff(c.got)
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
