package queries

import (
	"time"

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
// Flink runs it as a regular join: both sides are kept forever, so an
// auction matches its seller whichever arrives first. eddy uses a
// stream-stream join (the auctions re-keyed by seller through a
// repartition topic, the persons keyed by id already) whose window, q3Window
// either way, covers the generator's horizon with a wide margin: an auction
// names one of the NumActivePeople newest persons or one up to ten ids
// ahead, and events are delayed by at most MaxDelay, so at the default
// config a seller and its auction are at most 1,000 persons (5 s) + 3 s
// apart; at 1,000 events a second, 53 s. Persons and auctions are unique,
// so each matching pair meets exactly once, when the second arrives: the
// result set is the SQL's. The state kept is the window's persons and
// auctions (retention 2 × q3Window + grace), not every person forever.
//
// Output: key the auction id (serde.Int64), value q3Row, timestamp the
// later of the person's and the auction's. Check: every (auction, seller)
// pair the SQL selects over the events, once, at that timestamp (a
// digest).
func q3() Query {
	return Query{
		Name:  "q3",
		Title: "local item suggestion",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			persons := eddy.Source(t, in.Persons, serde.Int64(), nexmark.PersonSerde())
			sellers := eddy.MapValues(eddy.Filter(persons, func(_ int64, p nexmark.Person) bool { return q3State(p.State) }),
				func(_ int64, p nexmark.Person) q3Row { return q3Row{Name: p.Name, City: p.City, State: p.State} })
			auctions := eddy.Source(t, in.Auctions, serde.Int64(), nexmark.AuctionSerde())
			bySeller := eddy.Map(eddy.Filter(auctions, func(_ int64, a nexmark.Auction) bool { return a.Category == q3Category }),
				func(_ int64, a nexmark.Auction) (int64, int64) { return a.Seller, a.ID })
			joined := eddy.JoinStreams(sellers, bySeller, eddy.JoinWindowsOf(q3Window).WithGrace(q3Grace), eddy.InnerJoin, "q3-join",
				serde.Int64(), q3RowSerde{}, serde.Int64(),
				func(_ int64, p q3Row, _ bool, auction int64, _ bool) q3Row {
					p.ID = auction
					return p
				})
			eddy.To(eddy.SelectKey(joined, func(_ int64, r q3Row) int64 { return r.ID }), out, serde.Int64(), q3RowSerde{})
		},
		NewCheck: func(g *nexmark.Generator, n int64) Check {
			return newAppendCheck(func(add func(key, value []byte, ts int64)) {
				type seller struct {
					row q3Row
					ts  int64
				}
				sellers := map[int64]seller{}
				type auction struct{ id, seller, ts int64 }
				var auctions []auction
				for i := range n {
					switch nexmark.KindOf(i) {
					case nexmark.KindPerson:
						e := g.Event(i)
						if p := &e.Person; q3State(p.State) {
							sellers[p.ID] = seller{q3Row{Name: p.Name, City: p.City, State: p.State}, p.DateTime}
						}
					case nexmark.KindAuction:
						e := g.Event(i)
						if a := &e.Auction; a.Category == q3Category {
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
					v, _ = q3RowSerde{}.Serialize(v[:0], row)
					add(k, v, max(a.ts, s.ts))
				}
			})
		},
		Result: Result{
			Columns: []string{"name", "city", "state", "id"},
			Rows: func(_, value []byte, row func(...any)) error {
				r, err := q3RowSerde{}.Deserialize(value)
				if err != nil {
					return err
				}
				row(r.Name, r.City, r.State, r.ID)
				return nil
			},
		},
	}
}

const (
	q3Category = 10
	q3Window   = 60 * time.Second
	q3Grace    = 4 * time.Second
)

func q3State(s string) bool { return s == "OR" || s == "ID" || s == "CA" }

// q3Row is q3's result row; before the join it carries the seller alone.
type q3Row struct {
	Name, City, State string
	ID                int64
}

type q3RowSerde struct{}

func (q3RowSerde) Serialize(dst []byte, r q3Row) ([]byte, error) {
	dst = appendString(dst, r.Name)
	dst = appendString(dst, r.City)
	dst = appendString(dst, r.State)
	return appendInt(dst, r.ID), nil
}

func (q3RowSerde) Deserialize(b []byte) (q3Row, error) {
	r := reader{b: b}
	v := q3Row{Name: r.string(), City: r.string(), State: r.string(), ID: r.int()}
	return v, r.done()
}
