package queries

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q16 is "channel statistics report": q15's counts per channel and day,
// with the day's latest minute:
//
//	SELECT channel, DATE_FORMAT(dateTime, 'yyyy-MM-dd') AS day,
//	       max(DATE_FORMAT(dateTime, 'HH:mm')) AS minute,
//	       count(*) AS total_bids, … (q15's twelve counts)
//	FROM bid
//	GROUP BY channel, DATE_FORMAT(dateTime, 'yyyy-MM-dd')
//
// An unbounded group aggregation, an updating result; day and minute are
// UTC. The maximum of the 'HH:mm' strings is the one of the latest minute
// of the day (they are zero-padded), so eddy keeps the minute of the day
// as a number and formats it for the output.
//
// Plan: q15's, with the bids re-keyed by (channel, day) (q16Group)
// through a repartition topic, and the latest minute kept beside the
// counts in the aggregate.
//
// Output: key Q16Key (Q16KeySerde), value Q16Row (Q16RowSerde),
// timestamp the latest bid's; an upsert per (channel, day). Check: the
// last row per key against the SQL's, computed with maps of sets.
func q16() Query {
	return Query{
		Name:  "q16",
		Title: "channel statistics report",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
			byGroup := eddy.Map(bids, func(_ int64, b nexmark.Bid) (q16Group, distinctBid) {
				return q16Group{Channel: b.Channel, Day: utcDay(b.DateTime)}, project(&b)
			})
			g := eddy.GroupByKey(eddy.Repartition(byGroup, "q16-bids-by-channel-day", q16GroupSerde{}, distinctBidSerde{}), q16GroupSerde{})
			counts := eddy.AggregateDistinct(g, "q16-counts", distinctBidColumns[q16Group](),
				func() q16Counts { return q16Counts{} },
				func(_ q16Group, b distinctBid, fresh []uint64, c q16Counts) q16Counts {
					c.add(b.Price, fresh)
					c.minute = max(c.minute, minuteOfDay(b.DateTime))
					return c
				}, q16CountsSerde{})
			rows := eddy.Map(eddy.ToStream(counts), func(k q16Group, c q16Counts) (Q16Key, Q16Row) {
				key := Q16Key{Channel: k.Channel, Day: formatDay(k.Day)}
				return key, Q16Row{Channel: key.Channel, Day: key.Day, Minute: fmt.Sprintf("%02d:%02d", c.minute/60, c.minute%60), BidCounts: c.BidCounts}
			})
			eddy.To(rows, out, Q16KeySerde{}, Q16RowSerde{})
		},
		NewCheck: func(g *nexmark.Generator, n int64) Check { return &q16Check{g: g, n: n, got: newLastRows()} },
		Result: Result{
			Columns: append([]string{"channel", "day", "minute"}, bidCountsColumns()...),
			Upsert:  true,
			Rows: func(_, value []byte, row func(values ...any)) error {
				r, err := Q16RowSerde{}.Deserialize(value)
				if err != nil {
					return err
				}
				row(append([]any{r.Channel, r.Day, r.Minute}, r.BidCounts.values()...)...)
				return nil
			},
		},
	}
}

// minuteOfDay is the minute of ts's UTC day, 0 to 1439.
func minuteOfDay(ts int64) int64 {
	return (ts - utcDay(ts)*int64(24*time.Hour/time.Millisecond)) / int64(time.Minute/time.Millisecond)
}

// q16Group is the group of q16: a channel and a utcDay.
type q16Group struct {
	Channel string
	Day     int64
}

// q16GroupSerde encodes a q16Group as the day (a zig-zag varint) and the
// channel's bytes.
type q16GroupSerde struct{}

func (q16GroupSerde) Serialize(dst []byte, g q16Group) ([]byte, error) {
	return append(appendInt(dst, g.Day), g.Channel...), nil
}

func (q16GroupSerde) Deserialize(b []byte) (q16Group, error) {
	r := reader{b: b}
	g := q16Group{Day: r.int(), Channel: r.rest()}
	return g, r.done()
}

// q16Counts is q16's aggregate: the counts and the latest minute of the
// day.
type q16Counts struct {
	BidCounts
	minute int64
}

type q16CountsSerde struct{}

func (q16CountsSerde) Serialize(dst []byte, c q16Counts) ([]byte, error) {
	return appendInt(appendBidCounts(dst, &c.BidCounts), c.minute), nil
}

func (q16CountsSerde) Deserialize(b []byte) (q16Counts, error) {
	r := reader{b: b}
	c := q16Counts{BidCounts: r.bidCounts(), minute: r.int()}
	return c, r.done()
}

// Q16Key is the key of q16's output: the group.
type Q16Key struct {
	Channel string
	// Day is the UTC day, "2026-01-01".
	Day string
}

// Q16KeySerde encodes a Q16Key as the day's ten bytes followed by the
// channel's bytes.
type Q16KeySerde struct{}

// Serialize implements serde.Serde.
func (Q16KeySerde) Serialize(dst []byte, k Q16Key) ([]byte, error) {
	if len(k.Day) != len(time.DateOnly) {
		return dst, fmt.Errorf("%w: q16 key day %q is not yyyy-MM-dd", errCorrupt, k.Day)
	}
	return append(append(dst, k.Day...), k.Channel...), nil
}

// Deserialize implements serde.Serde.
func (Q16KeySerde) Deserialize(b []byte) (Q16Key, error) {
	if len(b) < len(time.DateOnly) {
		return Q16Key{}, fmt.Errorf("%w: q16 key of %d bytes, want at least %d", errCorrupt, len(b), len(time.DateOnly))
	}
	return Q16Key{Day: string(b[:len(time.DateOnly)]), Channel: string(b[len(time.DateOnly):])}, nil
}

// Q16Row is one row of q16's result.
type Q16Row struct {
	Channel string
	// Day is the UTC day, "2026-01-01"; Minute the latest minute of a
	// bid of the group, "23:59".
	Day, Minute string
	BidCounts
}

// Q16RowSerde encodes a Q16Row: channel, day and minute (each a uvarint
// length and the bytes), then the twelve counts in the SQL's order as
// zig-zag varints.
type Q16RowSerde struct{}

// Serialize implements serde.Serde.
func (Q16RowSerde) Serialize(dst []byte, r Q16Row) ([]byte, error) {
	return appendBidCounts(appendString(appendString(appendString(dst, r.Channel), r.Day), r.Minute), &r.BidCounts), nil
}

// Deserialize implements serde.Serde.
func (Q16RowSerde) Deserialize(b []byte) (Q16Row, error) {
	r := reader{b: b}
	v := Q16Row{Channel: r.string(), Day: r.string(), Minute: r.string(), BidCounts: r.bidCounts()}
	return v, r.done()
}

type q16Check struct {
	g   *nexmark.Generator
	n   int64
	got *lastRows
}

func (c *q16Check) Add(key, value []byte, _ int64) { c.got.add(key, value) }

func (c *q16Check) Verify() error {
	type group struct{ channel, day string }
	groups := map[group]*bidSets{}
	minutes := map[group]string{}
	for i := range c.n {
		if nexmark.KindOf(i) != nexmark.KindBid {
			continue
		}
		b := c.g.Event(i).Bid
		at := time.UnixMilli(b.DateTime).UTC()
		k := group{b.Channel, at.Format("2006-01-02")}
		if groups[k] == nil {
			groups[k] = &bidSets{}
		}
		groups[k].add(&b)
		if m := at.Format("15:04"); m > minutes[k] {
			minutes[k] = m
		}
	}
	want := map[string][]byte{}
	for k, s := range groups {
		key, _ := Q16KeySerde{}.Serialize(nil, Q16Key{Channel: k.channel, Day: k.day})
		want[string(key)], _ = Q16RowSerde{}.Serialize(nil, Q16Row{Channel: k.channel, Day: k.day, Minute: minutes[k], BidCounts: s.counts()})
	}
	return c.got.compare(want, func(key, value []byte) string {
		r, err := Q16RowSerde{}.Deserialize(value)
		if err != nil {
			return fmt.Sprintf("key %q: undecodable row (%v)", key, err)
		}
		return fmt.Sprintf("key %q: %+v", key, r)
	})
}
