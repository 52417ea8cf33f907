package nexmark

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/eddy-streams/eddy/serde"
)

// The binary encoding: one tag byte (the Kind, so a Person's encoding is
// also its Event's and one decoder can sort a mixed topic), then the fields
// in model order, integers as zig-zag varints and strings as a uvarint
// length and the bytes. Measured on generated bids (BenchmarkSerde) it is
// half the size of serde.JSON (85 against 171 bytes), encodes about 15 and
// decodes about 25 times faster, with no allocation to encode and one to
// decode; JSON stays available through serde.JSON (the model has the Flink
// field names as tags) for topics that other tools read.
//
// Decoding converts the input to one string and cuts every string field
// from it: one allocation per record, and the result does not retain the
// caller's buffer, as serde.Serde requires.

// ErrCorrupt is wrapped by every decoding error.
var ErrCorrupt = errors.New("nexmark: corrupt encoding")

// PersonSerde encodes Person values in the binary encoding.
func PersonSerde() serde.Serde[Person] { return personSerde{} }

// AuctionSerde encodes Auction values in the binary encoding.
func AuctionSerde() serde.Serde[Auction] { return auctionSerde{} }

// BidSerde encodes Bid values in the binary encoding.
func BidSerde() serde.Serde[Bid] { return bidSerde{} }

// EventSerde encodes an Event as its member's encoding and decodes any of
// the three.
func EventSerde() serde.Serde[Event] { return eventSerde{} }

type (
	personSerde  struct{}
	auctionSerde struct{}
	bidSerde     struct{}
	eventSerde   struct{}
)

func appendInt(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

func appendString[S string | []byte](b []byte, s S) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendPerson(b []byte, p *Person) []byte {
	return appendPersonWith(b, p, p.Name, p.EmailAddress, p.CreditCard, p.City, p.State, p.Extra)
}

// appendPersonWith encodes p with the string fields given apart, so that
// the Source can encode from its draw buffer without making strings.
func appendPersonWith[S string | []byte](b []byte, p *Person, name, email, card, city, state, extra S) []byte {
	b = append(b, byte(KindPerson))
	b = appendInt(b, p.ID)
	b = appendString(b, name)
	b = appendString(b, email)
	b = appendString(b, card)
	b = appendString(b, city)
	b = appendString(b, state)
	b = appendInt(b, p.DateTime)
	return appendString(b, extra)
}

func appendAuction(b []byte, a *Auction) []byte {
	return appendAuctionWith(b, a, a.ItemName, a.Description, a.Extra)
}

func appendAuctionWith[S string | []byte](b []byte, a *Auction, item, desc, extra S) []byte {
	b = append(b, byte(KindAuction))
	b = appendInt(b, a.ID)
	b = appendString(b, item)
	b = appendString(b, desc)
	b = appendInt(b, a.InitialBid)
	b = appendInt(b, a.Reserve)
	b = appendInt(b, a.DateTime)
	b = appendInt(b, a.Expires)
	b = appendInt(b, a.Seller)
	b = appendInt(b, a.Category)
	return appendString(b, extra)
}

func appendBid(b []byte, v *Bid) []byte { return appendBidWith(b, v, v.Channel, v.URL, v.Extra) }

func appendBidWith[S string | []byte](b []byte, v *Bid, channel, url, extra S) []byte {
	b = append(b, byte(KindBid))
	b = appendInt(b, v.Auction)
	b = appendInt(b, v.Bidder)
	b = appendInt(b, v.Price)
	b = appendString(b, channel)
	b = appendString(b, url)
	b = appendInt(b, v.DateTime)
	return appendString(b, extra)
}

// decoder reads the encoding from a string, so that string fields are
// substrings of one allocation. The first error sticks and later reads
// return zero values, which keeps the field-by-field decoders linear.
type decoder struct {
	s   string
	off int
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d of %d", ErrCorrupt, what, d.off, len(d.s))
	}
}

func (d *decoder) uvarint() uint64 {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		if d.err != nil || d.off >= len(d.s) {
			d.fail("truncated varint")
			return 0
		}
		c := d.s[d.off]
		d.off++
		if shift == 63 && c > 1 {
			d.fail("varint overflows 64 bits")
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	d.fail("varint overflows 64 bits")
	return 0
}

func (d *decoder) int() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.s)-d.off) {
		d.fail(fmt.Sprintf("string of %d bytes", n))
		return ""
	}
	s := d.s[d.off : d.off+int(n)]
	d.off += int(n)
	return s
}

// begin checks the tag byte.
func (d *decoder) begin(k Kind) {
	if len(d.s) == 0 {
		d.fail("empty record")
		return
	}
	if Kind(d.s[0]) != k {
		d.fail(fmt.Sprintf("tag %d, want %d (%v)", d.s[0], k, k))
		return
	}
	d.off = 1
}

// finish reports trailing bytes, so that a record of another type that
// happens to parse is not accepted silently.
func (d *decoder) finish() error {
	if d.err == nil && d.off != len(d.s) {
		d.fail("trailing bytes")
	}
	return d.err
}

func (d *decoder) person() (p Person) {
	d.begin(KindPerson)
	p.ID = d.int()
	p.Name = d.string()
	p.EmailAddress = d.string()
	p.CreditCard = d.string()
	p.City = d.string()
	p.State = d.string()
	p.DateTime = d.int()
	p.Extra = d.string()
	return p
}

func (d *decoder) auction() (a Auction) {
	d.begin(KindAuction)
	a.ID = d.int()
	a.ItemName = d.string()
	a.Description = d.string()
	a.InitialBid = d.int()
	a.Reserve = d.int()
	a.DateTime = d.int()
	a.Expires = d.int()
	a.Seller = d.int()
	a.Category = d.int()
	a.Extra = d.string()
	return a
}

func (d *decoder) bid() (v Bid) {
	d.begin(KindBid)
	v.Auction = d.int()
	v.Bidder = d.int()
	v.Price = d.int()
	v.Channel = d.string()
	v.URL = d.string()
	v.DateTime = d.int()
	v.Extra = d.string()
	return v
}

func (personSerde) Serialize(dst []byte, v Person) ([]byte, error) { return appendPerson(dst, &v), nil }

func (personSerde) Deserialize(b []byte) (Person, error) {
	d := decoder{s: string(b)}
	p := d.person()
	if err := d.finish(); err != nil {
		return Person{}, fmt.Errorf("nexmark: decode person: %w", err)
	}
	return p, nil
}

func (auctionSerde) Serialize(dst []byte, v Auction) ([]byte, error) {
	return appendAuction(dst, &v), nil
}

func (auctionSerde) Deserialize(b []byte) (Auction, error) {
	d := decoder{s: string(b)}
	a := d.auction()
	if err := d.finish(); err != nil {
		return Auction{}, fmt.Errorf("nexmark: decode auction: %w", err)
	}
	return a, nil
}

func (bidSerde) Serialize(dst []byte, v Bid) ([]byte, error) { return appendBid(dst, &v), nil }

func (bidSerde) Deserialize(b []byte) (Bid, error) {
	d := decoder{s: string(b)}
	v := d.bid()
	if err := d.finish(); err != nil {
		return Bid{}, fmt.Errorf("nexmark: decode bid: %w", err)
	}
	return v, nil
}

func (eventSerde) Serialize(dst []byte, e Event) ([]byte, error) {
	switch e.Kind {
	case KindPerson:
		return appendPerson(dst, &e.Person), nil
	case KindAuction:
		return appendAuction(dst, &e.Auction), nil
	case KindBid:
		return appendBid(dst, &e.Bid), nil
	}
	return dst, fmt.Errorf("nexmark: encode event: invalid kind %d", e.Kind)
}

func (eventSerde) Deserialize(b []byte) (Event, error) {
	var e Event
	if len(b) == 0 {
		return e, fmt.Errorf("nexmark: decode event: %w: empty record", ErrCorrupt)
	}
	d := decoder{s: string(b)}
	switch e.Kind = Kind(b[0]); e.Kind {
	case KindPerson:
		e.Person = d.person()
	case KindAuction:
		e.Auction = d.auction()
	case KindBid:
		e.Bid = d.bid()
	default:
		d.fail(fmt.Sprintf("unknown tag %d", b[0]))
	}
	if err := d.finish(); err != nil {
		return Event{}, fmt.Errorf("nexmark: decode event: %w", err)
	}
	return e, nil
}
