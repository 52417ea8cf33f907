package queries

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

func TestQ21(t *testing.T) {
	eachRate(t, func(t *testing.T, cfg nexmark.Config, g *nexmark.Generator) {
		const n = 30_000
		recs := driveQuery(t, q21(), g, n, nexmark.Topics{Bids: "bid"}, nil)
		requireChecked(t, func() Check { return q21().NewCheck(g, n) }, recs)
		fromURL := 0
		for _, r := range recs {
			row, err := Q21RowSerde{}.Deserialize(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			if _, hot := hotChannelID(row.Channel); !hot {
				fromURL++
			}
		}
		t.Logf("%d rows of %d events, %d with the id from the URL", len(recs), n, fromURL)
		if fromURL == 0 {
			t.Error("no row took its id from the URL")
		}
	})
}

// TestChannelIDParam compares the scan with Go's regexp on edge cases and
// on random strings made of the pattern's pieces.
func TestChannelIDParam(t *testing.T) {
	re := q21Pattern()
	same := func(url string) {
		t.Helper()
		got, ok := channelIDParam(url)
		m := re.FindStringSubmatch(url)
		if ok != (m != nil) || (ok && got != m[2]) {
			t.Errorf("channelIDParam(%q) = %q, %v; the regexp gives %q", url, got, ok, m)
		}
	}
	for _, url := range []string{
		"", "channel_id=", "channel_id=7", "channel_id=7&x=1", "&channel_id=", "a&channel_id=12&channel_id=13",
		"xchannel_id=1", "xchannel_id=1&channel_id=2", "a=1&bchannel_id=3", "channel_id", "channel_id=&",
		"https://www.nexmark.com/abc/def/ghi/item.htm?query=1&channel_id=1234",
		"https://www.nexmark.com/abc/def/ghi/item.htm?query=1",
		"https://x/item.htm?channel_id=5", "&&channel_id==&", "channel_id=é\x80&", "&channel_id=a\nb",
		"channel_id=channel_id=1", "&xchannel_id=2&channel_id=3&",
	} {
		same(url)
	}
	pieces := []string{"channel_id=", "channel_id", "&", "=", "x", "?", "_id=", "c", "\xff"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		var b strings.Builder
		for range r.IntN(6) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		same(b.String())
	}
}

func TestHotChannelID(t *testing.T) {
	for channel, want := range map[string]string{
		"Apple": "0", "GOOGLE": "1", "facebook": "2", "Baidu": "3", "FaceBooK": "2", // a Kelvin sign
		"channel-1": "", "apples": "", "": "", "baidu ": "",
	} {
		got, ok := hotChannelID(channel)
		if got != want || ok != (want != "") {
			t.Errorf("hotChannelID(%q) = %q, %v; want %q", channel, got, ok, want)
		}
		if lower := strings.ToLower(channel); ok && lower != "apple" && lower != "google" && lower != "facebook" && lower != "baidu" {
			t.Errorf("%q is a hot channel, but lower-cases to %q", channel, lower)
		}
	}
}

func TestQ21Result(t *testing.T) {
	in := Q21Row{Auction: 1001, Bidder: 2002, Price: 3003, Channel: "channel-9", ChannelID: "9"}
	b, _ := Q21RowSerde{}.Serialize(nil, in)
	if out, err := (Q21RowSerde{}).Deserialize(b); err != nil || out != in {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	for k := range len(b) {
		if _, err := (Q21RowSerde{}).Deserialize(b[:k]); err == nil {
			t.Errorf("%d of %d bytes decoded", k, len(b))
		}
	}
	requireRows(t, resultRows(t, q21(), nil, b), []any{int64(1001), int64(2002), int64(3003), "channel-9", "9"})
}
