package queries

import (
	"regexp"
	"strings"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q21 is "add channel id": each bid with an id for its channel, from the
// channel's name for the four hot channels, else from its URL:
//
//	SELECT auction, bidder, price, channel,
//	       CASE WHEN lower(channel) = 'apple' THEN '0'
//	            WHEN lower(channel) = 'google' THEN '1'
//	            WHEN lower(channel) = 'facebook' THEN '2'
//	            WHEN lower(channel) = 'baidu' THEN '3'
//	            ELSE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)
//	       END AS channel_id
//	FROM bid
//	WHERE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) IS NOT NULL
//	   OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')
//
// Plan: one FlatMapValues on the bids that keeps a bid with its id or
// drops it; no state. The regular expression is a hand-written scan
// (channelIDParam), which gives what the pattern's leftmost match gives
// (Flink's REGEXP_EXTRACT is Java's Matcher.find, Go's regexp finds the
// same leftmost-first match; the tests compare the scan with Go's regexp)
// without a regexp engine on the per-record path. The id is a substring
// of the decoded URL: no allocation.
//
// Output: key the auction id (serde.Int64), value Q21Row (Q21RowSerde),
// timestamp the bid's. Check: every row the SQL selects, once (a digest),
// computed with Go's regexp and strings.ToLower.
func q21() Query {
	return Query{
		Name:  "q21",
		Title: "add channel id",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
			rows := eddy.FlatMapValues(bids, func(dst []Q21Row, _ int64, b nexmark.Bid) []Q21Row {
				id, ok := hotChannelID(b.Channel)
				if !ok {
					if id, ok = channelIDParam(b.URL); !ok {
						return dst
					}
				}
				return append(dst, Q21Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, ChannelID: id})
			})
			eddy.To(rows, out, serde.Int64(), Q21RowSerde{})
		},
		NewCheck: newQ21Check,
		Result: Result{
			Columns: []string{"auction", "bidder", "price", "channel", "channel_id"},
			Rows: func(_, value []byte, row func(values ...any)) error {
				r, err := Q21RowSerde{}.Deserialize(value)
				if err != nil {
					return err
				}
				row(r.Auction, r.Bidder, r.Price, r.Channel, r.ChannelID)
				return nil
			},
		},
	}
}

// Q21Row is one row of q21's result.
type Q21Row struct {
	Auction, Bidder, Price int64
	Channel                string
	// ChannelID is never NULL: the SQL's filter keeps only the bids that
	// have one.
	ChannelID string
}

// Q21RowSerde encodes a Q21Row: auction, bidder, price, channel,
// channel_id; integers as zig-zag varints, strings as a uvarint length
// and the bytes.
type Q21RowSerde struct{}

// Serialize implements serde.Serde.
func (Q21RowSerde) Serialize(dst []byte, r Q21Row) ([]byte, error) {
	dst = appendInt(dst, r.Auction)
	dst = appendInt(dst, r.Bidder)
	dst = appendInt(dst, r.Price)
	dst = appendString(dst, r.Channel)
	return appendString(dst, r.ChannelID), nil
}

// Deserialize implements serde.Serde.
func (Q21RowSerde) Deserialize(b []byte) (Q21Row, error) {
	r := reader{b: b}
	v := Q21Row{Auction: r.int(), Bidder: r.int(), Price: r.int(), Channel: r.string(), ChannelID: r.string()}
	return v, r.done()
}

// hotChannelID is the SQL's CASE on lower(channel) for the four named
// channels. strings.EqualFold compares as lower-casing does for these
// words: the only other runes that fold to their letters, the Kelvin sign
// (to k) and the long s (to s, in none of them), lower-case in Java as
// they fold.
func hotChannelID(channel string) (string, bool) {
	switch {
	case strings.EqualFold(channel, "apple"):
		return "0", true
	case strings.EqualFold(channel, "google"):
		return "1", true
	case strings.EqualFold(channel, "facebook"):
		return "2", true
	case strings.EqualFold(channel, "baidu"):
		return "3", true
	}
	return "", false
}

// channelIDParam is REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2):
// the value of the first "channel_id=" that starts url or follows a '&',
// up to the next '&' or the end; false where the pattern does not match
// (the SQL's NULL). A match's start orders as the position of its
// "channel_id=", so the first such position is the leftmost match.
func channelIDParam(url string) (string, bool) {
	const param = "channel_id="
	for from := 0; ; {
		i := strings.Index(url[from:], param)
		if i < 0 {
			return "", false
		}
		i += from
		if i == 0 || url[i-1] == '&' {
			v := url[i+len(param):]
			if end := strings.IndexByte(v, '&'); end >= 0 {
				v = v[:end]
			}
			return v, true
		}
		from = i + 1
	}
}

// newQ21Check digests the reference's rows, with the SQL's own functions
// in Go: strings.ToLower and the regular expression itself.
func newQ21Check(g *nexmark.Generator, n int64) Check {
	return newAppendCheck(func(add func(key, value []byte, ts int64)) {
		re := q21Pattern()
		ids := map[string]string{"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}
		var k, v []byte
		for i := range n {
			if nexmark.KindOf(i) != nexmark.KindBid {
				continue
			}
			e := g.Event(i)
			b := &e.Bid
			id, ok := ids[strings.ToLower(b.Channel)]
			if !ok {
				m := re.FindStringSubmatch(b.URL)
				if m == nil {
					continue
				}
				id = m[2]
			}
			k = int64Key(k[:0], b.Auction)
			v, _ = Q21RowSerde{}.Serialize(v[:0], Q21Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, ChannelID: id})
			add(k, v, b.DateTime)
		}
	})
}

// q21Pattern is the SQL's regular expression, for the check and the
// tests.
func q21Pattern() *regexp.Regexp { return regexp.MustCompile(`(&|^)channel_id=([^&]*)`) }
