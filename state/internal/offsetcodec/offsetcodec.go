// Package offsetcodec encodes state.Offsets into the bytes that the disk
// backends (state/pebble, state/rocksdb) store under their metadata key. One
// encoder for both keeps the format, its versions and its strictness in one
// place, so a fix to the decoder reaches every backend.
package offsetcodec

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/eddy-streams/eddy/state"
)

// Version is the first byte of the encoded offsets, the version Append
// writes. Version1 lacked the stream time; Decode still reads it, so a
// database written before stream time existed opens (with state.NoStreamTime)
// instead of being rebuilt. A database written by a later format is reported
// corrupt rather than misread.
const (
	Version1 = 1
	Version  = 2
)

// ErrMalformed is wrapped by every decoding failure; a backend wraps it in
// turn with state.ErrCorrupt, because offsets that cannot be read make the
// state they describe unusable.
var ErrMalformed = errors.New("offsetcodec: bad offsets encoding")

// Append appends the encoding of o to dst:
//
//	version byte (2)
//	uvarint n, then n × (uvarint len, topic, varint partition, varint offset)
//	uvarint m, then m × (uvarint len, store, varint offset)
//	varint stream time (absent in version 1)
//
// Entries are sorted, so equal offsets always encode to equal bytes. The
// stream time goes last so that version 2 is version 1 plus a suffix, and one
// decoder reads both.
func Append(dst []byte, o state.Offsets) []byte {
	dst = append(dst, Version)

	tps := make([]state.TopicPartition, 0, len(o.Input))
	for tp := range o.Input {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b state.TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	dst = binary.AppendUvarint(dst, uint64(len(tps)))
	for _, tp := range tps {
		dst = appendString(dst, tp.Topic)
		dst = binary.AppendVarint(dst, int64(tp.Partition))
		dst = binary.AppendVarint(dst, o.Input[tp])
	}

	stores := make([]string, 0, len(o.Changelog))
	for s := range o.Changelog {
		stores = append(stores, s)
	}
	slices.Sort(stores)
	dst = binary.AppendUvarint(dst, uint64(len(stores)))
	for _, s := range stores {
		dst = appendString(dst, s)
		dst = binary.AppendVarint(dst, o.Changelog[s])
	}
	return binary.AppendVarint(dst, o.StreamTime)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// Decode is the inverse of Append. It accepts exactly what Append can
// produce, or could in version 1 (no trailing bytes, no duplicate entries),
// since anything else means the metadata key was damaged.
func Decode(buf []byte) (state.Offsets, error) {
	d := decoder{buf: buf}
	v := d.byte()
	if d.err == nil && v != Version && v != Version1 {
		return state.Offsets{}, fmt.Errorf("%w: unknown version %d", ErrMalformed, v)
	}
	o := state.NewOffsets()
	n := d.count()
	for i := uint64(0); i < n && d.err == nil; i++ {
		topic := d.string()
		p := d.varint()
		off := d.varint()
		if d.err != nil {
			break
		}
		if p < math.MinInt32 || p > math.MaxInt32 {
			return state.Offsets{}, fmt.Errorf("%w: partition %d out of range", ErrMalformed, p)
		}
		tp := state.TopicPartition{Topic: topic, Partition: int32(p)}
		if _, dup := o.Input[tp]; dup {
			return state.Offsets{}, fmt.Errorf("%w: duplicate input %s", ErrMalformed, tp)
		}
		o.Input[tp] = off
	}
	m := d.count()
	for i := uint64(0); i < m && d.err == nil; i++ {
		store := d.string()
		off := d.varint()
		if d.err != nil {
			break
		}
		if _, dup := o.Changelog[store]; dup {
			return state.Offsets{}, fmt.Errorf("%w: duplicate store %q", ErrMalformed, store)
		}
		o.Changelog[store] = off
	}
	if v == Version && d.err == nil {
		o.StreamTime = d.varint()
	}
	if d.err != nil {
		return state.Offsets{}, d.err
	}
	if len(d.buf) != 0 {
		return state.Offsets{}, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.buf))
	}
	return o, nil
}

// decoder reads from buf and records the first error, so Decode can
// check once per entry instead of after every field.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or malformed %s", ErrMalformed, what)
	}
	d.buf = nil
}

func (d *decoder) byte() byte {
	if len(d.buf) == 0 {
		d.fail("version")
		return 0
	}
	b := d.buf[0]
	d.buf = d.buf[1:]
	return b
}

func (d *decoder) uvarint(what string) uint64 {
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

// count reads an entry count. Every entry takes at least two bytes, so a
// count above half the remaining input is damage, not data.
func (d *decoder) count() uint64 {
	n := d.uvarint("count")
	if d.err == nil && n > uint64(len(d.buf)/2) {
		d.fail("count")
		return 0
	}
	return n
}

func (d *decoder) string() string {
	n := d.uvarint("length")
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.buf)) {
		d.fail("string")
		return ""
	}
	s := string(d.buf[:n])
	d.buf = d.buf[n:]
	return s
}
