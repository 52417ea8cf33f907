package queries

import (
	"fmt"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q3 is local item suggestion: who sells in category 10 in Oregon, Idaho
// or California.
//
//	SELECT P.name, P.city, P.state, A.id
//	FROM auction AS A INNER JOIN person AS P on A.seller = P.id
//	WHERE A.category = 10 and (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')
//
// A regular join, as Flink runs it: both sides are kept, so an auction
// matches its seller whichever arrives first, however far apart
// (eddy.JoinStreamsRegular). The auctions of category 10 are re-keyed by
// seller (through the repartition topic q3-join-left); the persons are
// keyed by id already. A person id is unique (RightUnique): an auction
// that finds its seller is not stored, and those that came before their
// seller leave the join when it arrives. The state filter is applied
// after the join, not before: a person of another state still joins, kept
// as a marker without its columns (q3Seller), so that its auctions are not
// stored waiting for a seller that would never come; their results are
// dropped. The SQL's result is the same, as the filter reads only the
// person's columns.
//
// Output: key the auction id (serde.Int64), value Q3Row (Q3RowSerde),
// timestamp the later of the person's and the auction's. Check: every
// (auction, seller) pair the SQL selects over the events, once, at that
// timestamp (a digest).
func q3() Query {
	return Query{
		Name:  "q3",
		Title: "local item suggestion",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			persons := eddy.MapValues(eddy.Source(t, in.Persons, serde.Int64(), nexmark.PersonSerde()),
				func(_ int64, p nexmark.Person) q3Seller {
					if !q3State(p.State) {
						return q3Seller{}
					}
					return q3Seller{Name: p.Name, City: p.City, State: p.State, OK: true}
				})
			auctions := eddy.Source(t, in.Auctions, serde.Int64(), nexmark.AuctionSerde())
			bySeller := eddy.Map(eddy.Filter(auctions, func(_ int64, a nexmark.Auction) bool { return a.Category == q3Category }),
				func(_ int64, a nexmark.Auction) (int64, int64) { return a.Seller, a.ID })
			joined := eddy.JoinStreamsRegular(bySeller, persons, eddy.RegularJoin{}.RightUnique(), "q3-join",
				serde.Int64(), serde.Int64(), q3SellerSerde{},
				func(_ int64, auction int64, p q3Seller) q3Seller {
					p.auction = auction
					return p
				})
			kept := eddy.Filter(joined, func(_ int64, p q3Seller) bool { return p.OK })
			rows := eddy.Map(kept, func(_ int64, p q3Seller) (int64, Q3Row) {
				return p.auction, Q3Row{Name: p.Name, City: p.City, State: p.State, ID: p.auction}
			})
			eddy.To(rows, out, serde.Int64(), Q3RowSerde{})
		},
		NewCheck: func(g *nexmark.Generator, n int64) Check {
			return newAppendCheck(func(add func(key, value []byte, ts int64)) {
				type seller struct {
					row Q3Row
					ts  int64
				}
				sellers := map[int64]seller{}
				type auction struct{ id, seller, ts int64 }
				var auctions []auction
				for i := range n {
					switch nexmark.KindOf(i) {
					case nexmark.KindPerson:
						e := g.Event(i)
						if p := &e.Person; p.State == "OR" || p.State == "ID" || p.State == "CA" {
							sellers[p.ID] = seller{Q3Row{Name: p.Name, City: p.City, State: p.State}, p.DateTime}
						}
					case nexmark.KindAuction:
						e := g.Event(i)
						if a := &e.Auction; a.Category == 10 {
							auctions = append(auctions, auction{a.ID, a.Seller, a.DateTime})
						}
					}
				}
				var k, v []byte
				for _, a := range auctions {
					s, ok := sellers[a.seller]
					if !ok {
						continue
					}
					row := s.row
					row.ID = a.id
					k = int64Key(k[:0], a.id)
					v, _ = Q3RowSerde{}.Serialize(v[:0], row)
					add(k, v, max(a.ts, s.ts))
				}
			})
		},
		Result: Result{
			Columns: []string{"name", "city", "state", "id"},
			Rows: func(_, value []byte, row func(values ...any)) error {
				r, err := Q3RowSerde{}.Deserialize(value)
				if err != nil {
					return err
				}
				row(r.Name, r.City, r.State, r.ID)
				return nil
			},
		},
	}
}

const q3Category = 10

func q3State(s string) bool { return s == "OR" || s == "ID" || s == "CA" }

// q3Seller is what q3's join keeps of a person: name, city and state if
// the state is one the query selects (OK), nothing otherwise. auction is
// set on a joined pair, not stored.
type q3Seller struct {
	Name, City, State string
	OK                bool
	auction           int64
}

// q3SellerSerde writes a byte, 1 if OK, then the columns if OK.
type q3SellerSerde struct{}

func (q3SellerSerde) Serialize(dst []byte, p q3Seller) ([]byte, error) {
	if !p.OK {
		return append(dst, 0), nil
	}
	return appendString(appendString(appendString(append(dst, 1), p.Name), p.City), p.State), nil
}

func (q3SellerSerde) Deserialize(b []byte) (q3Seller, error) {
	if len(b) == 1 && b[0] == 0 {
		return q3Seller{}, nil
	}
	if len(b) == 0 || b[0] != 1 {
		return q3Seller{}, fmt.Errorf("%w: q3 seller of %d bytes", errCorrupt, len(b))
	}
	r := reader{b: b[1:]}
	p := q3Seller{Name: r.string(), City: r.string(), State: r.string(), OK: true}
	return p, r.done()
}

// Q3Row is q3's result row.
type Q3Row struct {
	Name, City, State string
	ID                int64
}

// Q3RowSerde encodes a Q3Row in the SQL's column order: name, city and
// state as a uvarint length and the bytes, the auction id as a zig-zag
// varint.
type Q3RowSerde struct{}

// Serialize implements serde.Serde.
func (Q3RowSerde) Serialize(dst []byte, r Q3Row) ([]byte, error) {
	dst = appendString(dst, r.Name)
	dst = appendString(dst, r.City)
	dst = appendString(dst, r.State)
	return appendInt(dst, r.ID), nil
}

// Deserialize implements serde.Serde.
func (Q3RowSerde) Deserialize(b []byte) (Q3Row, error) {
	r := reader{b: b}
	v := Q3Row{Name: r.string(), City: r.string(), State: r.string(), ID: r.int()}
	return v, r.done()
}
