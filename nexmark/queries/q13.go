package queries

import (
	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q13 is "bounded side input join": each bid enriched with the row of a
// bounded side input whose key is the bid's auction id mod 10000:
//
//	SELECT B.auction, B.bidder, B.price, B.dateTime, S.value
//	FROM (SELECT *, PROCTIME() as p_time FROM bid) B
//	JOIN side_input FOR SYSTEM_TIME AS OF B.p_time AS S
//	ON mod(B.auction, 10000) = S.key
//
// side_input is the suite's file of 10,000 rows (key, value) = (i, "i")
// (nexmark.SideInput), read from the topic in.SideInput.
//
// Plan: the side input is a global table (eddy.GlobalTableFrom: key
// serde.Int64, value serde.String), held whole by every instance and loaded
// before the bids run, as Flink's lookup join reads the file; each bid looks
// its row up with eddy.JoinGlobal on auction % 10000, with no repartition.
// FOR SYSTEM_TIME AS OF the processing time means the table as it stands
// when the bid is processed, which is what a global table gives. The join
// is inner, as the SQL's: a bid whose key had no row would give no row.
// With the suite's 10,000 keys every bid's key (0 … 9999) has one, so
// every bid gives exactly one row.
//
// Output: key the auction id (serde.Int64), value a Q13Row (Q13RowSerde),
// timestamp the bid's. Check: the join computed from the events and
// nexmark.SideInput (a map of its rows), every row once (a digest).
func q13() Query {
	return Query{Name: "q13", Title: "bounded side input join", Build: buildQ13, NewCheck: newQ13Check, Result: q13Result()}
}

// q13Mod is the SQL's modulus: mod(B.auction, 10000).
const q13Mod = 10_000

func buildQ13(t *eddy.Topology, in nexmark.Topics, out string) {
	bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
	side := eddy.GlobalTableFrom(t, in.SideInput, "q13-side-input", serde.Int64(), serde.String())
	rows := eddy.JoinGlobal(bids, side, func(_ int64, b nexmark.Bid) int64 { return b.Auction % q13Mod }, eddy.InnerJoin,
		func(_ int64, b nexmark.Bid, value string, _ bool) Q13Row {
			return Q13Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Value: value}
		})
	eddy.To(rows, out, serde.Int64(), Q13RowSerde{})
}

// Q13Row is q13's result row: the bid's columns and the side input's value.
type Q13Row struct {
	Auction, Bidder, Price, DateTime int64
	Value                            string
}

// Q13RowSerde encodes a Q13Row: auction, bidder, price and dateTime as
// zig-zag varints, then the value's bytes.
type Q13RowSerde struct{}

func (Q13RowSerde) Serialize(dst []byte, r Q13Row) ([]byte, error) {
	dst = appendInt(dst, r.Auction)
	dst = appendInt(dst, r.Bidder)
	dst = appendInt(dst, r.Price)
	dst = appendInt(dst, r.DateTime)
	return append(dst, r.Value...), nil
}

func (Q13RowSerde) Deserialize(b []byte) (Q13Row, error) {
	r := reader{b: b}
	v := Q13Row{Auction: r.int(), Bidder: r.int(), Price: r.int(), DateTime: r.int()}
	v.Value = r.rest()
	return v, r.done()
}

func q13Result() Result {
	return Result{
		Columns: []string{"auction", "bidder", "price", "dateTime", "value"},
		Rows: func(_, value []byte, row func(...any)) error {
			r, err := Q13RowSerde{}.Deserialize(value)
			if err != nil {
				return err
			}
			row(r.Auction, r.Bidder, r.Price, Timestamp(r.DateTime), r.Value)
			return nil
		},
	}
}

// newQ13Check is the inner join of the bids [0, n) with the side input's
// rows on auction mod 10000 = key, done with a map.
func newQ13Check(g *nexmark.Generator, n int64) Check {
	return newAppendCheck(func(add func(key, value []byte, ts int64)) {
		side := make(map[int64]string)
		for _, r := range nexmark.SideInput() {
			side[r.Key] = r.Value
		}
		var k, v []byte
		for i := range n {
			if nexmark.KindOf(i) != nexmark.KindBid {
				continue
			}
			b := g.Event(i).Bid
			value, ok := side[b.Auction%10000]
			if !ok {
				continue
			}
			k = int64Key(k[:0], b.Auction)
			v, _ = Q13RowSerde{}.Serialize(v[:0], Q13Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Value: value})
			add(k, v, b.DateTime)
		}
	})
}
