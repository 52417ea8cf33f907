package queries

import (
	"database/sql"
	"encoding/binary"
	"strings"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q22 is "get URL directories": each bid with the first three
// directories of its URL:
//
//	SELECT auction, bidder, price, channel,
//	       SPLIT_INDEX(url, '/', 3) AS dir1,
//	       SPLIT_INDEX(url, '/', 4) AS dir2,
//	       SPLIT_INDEX(url, '/', 5) AS dir3
//	FROM bid
//
// SPLIT_INDEX is Flink's: the string split at every separator, empty
// pieces kept, the piece at a zero-based index, NULL past the last piece
// (and for an empty string, which has no pieces). In
// "https://www.nexmark.com/abc/def/ghi/item.htm" the pieces are "https:",
// "", "www.nexmark.com", "abc", "def", "ghi", "item.htm".
//
// Plan: one MapValues on the bids; the directories are substrings of the
// decoded URL (no allocation); no state.
//
// Output: key the auction id (serde.Int64), value Q22Row (Q22RowSerde),
// timestamp the bid's. Check: every bid's row, once (a digest), computed
// with strings.Split.
func q22() Query {
	return Query{
		Name:  "q22",
		Title: "get URL directories",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
			rows := eddy.MapValues(bids, func(_ int64, b nexmark.Bid) Q22Row {
				return Q22Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel,
					Dir1: splitIndex(b.URL, '/', 3), Dir2: splitIndex(b.URL, '/', 4), Dir3: splitIndex(b.URL, '/', 5)}
			})
			eddy.To(rows, out, serde.Int64(), Q22RowSerde{})
		},
		NewCheck: newQ22Check,
		Result: Result{
			Columns: []string{"auction", "bidder", "price", "channel", "dir1", "dir2", "dir3"},
			Rows: func(_, value []byte, row func(values ...any)) error {
				r, err := Q22RowSerde{}.Deserialize(value)
				if err != nil {
					return err
				}
				row(r.Auction, r.Bidder, r.Price, r.Channel, nullable(r.Dir1), nullable(r.Dir2), nullable(r.Dir3))
				return nil
			},
		},
	}
}

// Q22Row is one row of q22's result; a directory the URL does not have
// is NULL (not Valid).
type Q22Row struct {
	Auction, Bidder, Price int64
	Channel                string
	Dir1, Dir2, Dir3       sql.NullString
}

// Q22RowSerde encodes a Q22Row: auction, bidder, price as zig-zag
// varints, channel as a uvarint length and the bytes, then each directory
// as a uvarint of 0 for NULL or its length + 1, and the bytes.
type Q22RowSerde struct{}

// Serialize implements serde.Serde.
func (Q22RowSerde) Serialize(dst []byte, r Q22Row) ([]byte, error) {
	dst = appendInt(dst, r.Auction)
	dst = appendInt(dst, r.Bidder)
	dst = appendInt(dst, r.Price)
	dst = appendString(dst, r.Channel)
	for _, d := range [...]sql.NullString{r.Dir1, r.Dir2, r.Dir3} {
		dst = appendNullString(dst, d)
	}
	return dst, nil
}

// Deserialize implements serde.Serde.
func (Q22RowSerde) Deserialize(b []byte) (Q22Row, error) {
	r := reader{b: b}
	v := Q22Row{Auction: r.int(), Bidder: r.int(), Price: r.int(), Channel: r.string()}
	v.Dir1, v.Dir2, v.Dir3 = r.nullString(), r.nullString(), r.nullString()
	return v, r.done()
}

func appendNullString(b []byte, s sql.NullString) []byte {
	if !s.Valid {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(s.String))+1)
	return append(b, s.String...)
}

// nullString reads what appendNullString wrote.
func (r *reader) nullString() sql.NullString {
	if r.err != nil {
		return sql.NullString{}
	}
	n, w := binary.Uvarint(r.b)
	if w <= 0 || n > uint64(len(r.b)-w)+1 {
		r.fail("bad nullable string length")
		return sql.NullString{}
	}
	r.b = r.b[w:]
	if n == 0 {
		return sql.NullString{}
	}
	s := string(r.b[:n-1])
	r.b = r.b[n-1:]
	return sql.NullString{String: s, Valid: true}
}

// nullable is s as a Result value: nil for NULL.
func nullable(s sql.NullString) any {
	if !s.Valid {
		return nil
	}
	return s.String
}

// splitIndex is Flink's SPLIT_INDEX(s, sep, i) for a one-byte separator:
// the i-th (from 0) piece of s between separators, empty pieces kept;
// NULL when s has fewer pieces or is empty.
func splitIndex(s string, sep byte, i int) sql.NullString {
	if s == "" || i < 0 {
		return sql.NullString{}
	}
	for ; i > 0; i-- {
		k := strings.IndexByte(s, sep)
		if k < 0 {
			return sql.NullString{}
		}
		s = s[k+1:]
	}
	if k := strings.IndexByte(s, sep); k >= 0 {
		s = s[:k]
	}
	return sql.NullString{String: s, Valid: true}
}

// newQ22Check digests the reference's rows, split with strings.Split.
func newQ22Check(g *nexmark.Generator, n int64) Check {
	return newAppendCheck(func(add func(key, value []byte, ts int64)) {
		var k, v []byte
		for i := range n {
			if nexmark.KindOf(i) != nexmark.KindBid {
				continue
			}
			e := g.Event(i)
			b := &e.Bid
			var dirs [3]sql.NullString
			if b.URL != "" {
				pieces := strings.Split(b.URL, "/")
				for d := range dirs {
					if 3+d < len(pieces) {
						dirs[d] = sql.NullString{String: pieces[3+d], Valid: true}
					}
				}
			}
			k = int64Key(k[:0], b.Auction)
			v, _ = Q22RowSerde{}.Serialize(v[:0], Q22Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel,
				Dir1: dirs[0], Dir2: dirs[1], Dir3: dirs[2]})
			add(k, v, b.DateTime)
		}
	})
}
