package nexmark

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func newGen(t testing.TB, cfg Config) *Generator {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGeneratorDeterministic(t *testing.T) {
	a := newGen(t, Config{Seed: 7})
	b := newGen(t, Config{Seed: 7})
	other := newGen(t, Config{Seed: 8})
	same := 0
	for _, i := range []int64{0, 1, 2, 3, 4, 49, 50, 51, 12345, 1 << 40} {
		ea, eb := a.Event(i), b.Event(i)
		if !reflect.DeepEqual(ea, eb) {
			t.Fatalf("event %d differs between two generators with one seed:\n%+v\n%+v", i, ea, eb)
		}
		// Asking again, and out of order, changes nothing: no state.
		if again := a.Event(i); !reflect.DeepEqual(ea, again) {
			t.Fatalf("event %d differs on a second call", i)
		}
		if reflect.DeepEqual(ea, other.Event(i)) {
			same++
		}
	}
	if same != 0 {
		t.Fatalf("%d events equal under seeds 7 and 8", same)
	}
}

func TestGeneratorProportions(t *testing.T) {
	g := newGen(t, Config{})
	var n [4]int
	for i := range int64(50_000) {
		e := g.Event(i)
		if e.Kind != KindOf(i) {
			t.Fatalf("event %d: kind %v, KindOf says %v", i, e.Kind, KindOf(i))
		}
		n[e.Kind]++
	}
	if n[KindPerson] != 1000 || n[KindAuction] != 3000 || n[KindBid] != 46000 {
		t.Fatalf("persons %d auctions %d bids %d, want 1000 3000 46000", n[KindPerson], n[KindAuction], n[KindBid])
	}
}

// TestGeneratorIDs checks the model's referential shape: people and
// auctions are numbered consecutively from 1000 in stream order, and every
// reference points at an id that exists or is at most the model's lead ahead
// (the reference generator lets bids precede their auction slightly).
func TestGeneratorIDs(t *testing.T) {
	g := newGen(t, Config{Seed: 3})
	const n = 50_000
	nextPerson, nextAuction := int64(FirstPersonID), int64(FirstAuctionID)
	people := map[int64]bool{}
	auctions := map[int64]bool{}
	var ahead, refs int
	for i := range int64(n) {
		e := g.Event(i)
		switch e.Kind {
		case KindPerson:
			if e.Person.ID != nextPerson {
				t.Fatalf("event %d: person %d, want %d", i, e.Person.ID, nextPerson)
			}
			people[e.Person.ID] = true
			nextPerson++
		case KindAuction:
			a := e.Auction
			if a.ID != nextAuction {
				t.Fatalf("event %d: auction %d, want %d", i, a.ID, nextAuction)
			}
			auctions[a.ID] = true
			nextAuction++
			if a.Seller < FirstPersonID || a.Seller >= nextPerson+personIDLead {
				t.Fatalf("event %d: seller %d outside [%d, %d)", i, a.Seller, FirstPersonID, nextPerson+personIDLead)
			}
			if a.Category < FirstCategoryID || a.Category >= FirstCategoryID+NumCategories {
				t.Fatalf("event %d: category %d", i, a.Category)
			}
			if a.Reserve < a.InitialBid || a.Expires <= a.DateTime {
				t.Fatalf("event %d: reserve %d < initial %d or expires %d <= %d", i, a.Reserve, a.InitialBid, a.Expires, a.DateTime)
			}
		case KindBid:
			b := e.Bid
			// The oldest auction a bid may name is NumInFlightAuctions
			// before the newest.
			lo := max(nextAuction-1-int64(g.cfg.NumInFlightAuctions), FirstAuctionID)
			if b.Auction < lo || b.Auction >= nextAuction+auctionIDLead {
				t.Fatalf("event %d: auction %d outside [%d, %d)", i, b.Auction, lo, nextAuction+auctionIDLead)
			}
			lo = max(nextPerson-int64(g.cfg.NumActivePeople), FirstPersonID)
			if b.Bidder < lo || b.Bidder >= nextPerson+personIDLead {
				t.Fatalf("event %d: bidder %d outside [%d, %d)", i, b.Bidder, lo, nextPerson+personIDLead)
			}
			if b.Price < 100 || b.Price > 100_000_000 {
				t.Fatalf("event %d: price %d", i, b.Price)
			}
			refs += 2
			if !auctions[b.Auction] {
				ahead++
			}
			if !people[b.Bidder] {
				ahead++
			}
		}
	}
	// References ahead of creation are the exception the model allows,
	// not the rule.
	if ahead*20 > refs {
		t.Fatalf("%d of %d bid references precede their person or auction", ahead, refs)
	}
	t.Logf("%d of %d bid references precede their person or auction", ahead, refs)
}

// TestGeneratorSkew checks the hot ratios: with HotAuctionRatio 2 about half
// of the bids in a stretch go to one auction.
func TestGeneratorSkew(t *testing.T) {
	g := newGen(t, Config{Seed: 1})
	count := map[int64]int{}
	bids := 0
	// Events 30,001..31,649 create auctions 1800–1899 (base 0): one hot
	// batch, so one hot auction throughout.
	for i := int64(30_050); i < 31_600; i++ {
		if e := g.Event(i); e.Kind == KindBid {
			count[e.Bid.Auction]++
			bids++
		}
	}
	top := 0
	for _, c := range count {
		top = max(top, c)
	}
	if frac := float64(top) / float64(bids); frac < 0.45 || frac > 0.6 {
		t.Fatalf("hottest auction has %.2f of the bids, want about 0.5", frac)
	}
}

func TestGeneratorTimes(t *testing.T) {
	g := newGen(t, Config{ProbDelayedEvent: -1, EventsPerSecond: 1000})
	for i := range int64(5000) {
		e := g.Event(i)
		if want := DefaultBaseTime + i; e.DateTime() != want {
			t.Fatalf("event %d at %d, want %d", i, e.DateTime(), want)
		}
	}
	g = newGen(t, Config{Seed: 2, ProbDelayedEvent: 0.1})
	late, maxLate := 0, int64(0)
	for i := range int64(10_000) {
		e := g.Event(i)
		d := g.Timestamp(i) - e.DateTime()
		if d < 0 || d > DefaultMaxDelay.Milliseconds() {
			t.Fatalf("event %d delayed by %dms", i, d)
		}
		if e.DateTime() < g.Watermark(i) {
			t.Fatalf("event %d at %d, before the watermark %d", i, e.DateTime(), g.Watermark(i))
		}
		if d > 0 {
			late++
			maxLate = max(maxLate, d)
		}
	}
	if late < 800 || late > 1200 {
		t.Fatalf("%d of 10000 events delayed, want about 1000", late)
	}
	t.Logf("%d delayed, at most %dms", late, maxLate)
}

func TestGeneratorSizes(t *testing.T) {
	g := newGen(t, Config{Seed: 5})
	var sum, n [4]int
	for i := range int64(50_000) {
		e := g.Event(i)
		var size int
		switch e.Kind {
		case KindPerson:
			p := e.Person
			size = 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State) + len(p.Extra)
			if strings.HasPrefix(p.EmailAddress, " ") || !strings.HasSuffix(p.EmailAddress, ".com") || len(p.CreditCard) != 19 {
				t.Fatalf("person %+v", p)
			}
		case KindAuction:
			a := e.Auction
			size = 48 + len(a.ItemName) + len(a.Description) + len(a.Extra)
		case KindBid:
			b := e.Bid
			size = 32 + len(b.Extra) // the reference counts neither channel nor URL
			if !strings.HasPrefix(b.URL, "https://www.nexmark.com/") {
				t.Fatalf("bid url %q", b.URL)
			}
		}
		sum[e.Kind] += size
		n[e.Kind]++
	}
	for k, want := range map[Kind]int{KindPerson: 200, KindAuction: 500, KindBid: 100} {
		avg := float64(sum[k]) / float64(n[k])
		if avg < float64(want)*0.95 || avg > float64(want)*1.05 {
			t.Errorf("%v: average size %.1f, want about %d", k, avg, want)
		}
	}
}

// TestGeneratorDefaultsInOrder: the zero Config is the Flink suite's
// stream, in order at 10M events a second.
func TestGeneratorDefaultsInOrder(t *testing.T) {
	g := newGen(t, Config{})
	for i := range int64(100_000) {
		if e := g.Event(i); e.DateTime() != g.Timestamp(i) {
			t.Fatalf("event %d at %d, want %d (in order)", i, e.DateTime(), g.Timestamp(i))
		}
	}
	if got := g.Timestamp(10_000_000) - g.Timestamp(0); got != 1000 {
		t.Fatalf("10M events span %d ms, want 1000", got)
	}
}

// TestGeneratorChannelIDs: nine in ten of the non-hot channels' URLs carry
// a channel_id, the reference's bit-reversed channel number; the hot
// channels' URLs carry none.
func TestGeneratorChannelIDs(t *testing.T) {
	g := newGen(t, Config{Seed: 3})
	seen := map[string]bool{}
	withID := 0
	for i := range int64(200_000) {
		e := g.Event(i)
		if e.Kind != KindBid || seen[e.Bid.Channel] {
			continue
		}
		b := e.Bid
		seen[b.Channel] = true
		_, id, ok := strings.Cut(b.URL, "&channel_id=")
		num, isOther := strings.CutPrefix(b.Channel, "channel-")
		if !isOther {
			if ok {
				t.Fatalf("hot channel %s has a channel_id: %s", b.Channel, b.URL)
			}
			continue
		}
		if !ok {
			continue
		}
		withID++
		c, _ := strconv.Atoi(num)
		if want := strconv.FormatInt(channelID(c), 10); id != want {
			t.Fatalf("channel %s: channel_id %s, want %s", b.Channel, id, want)
		}
		for _, dir := range strings.Split(strings.TrimPrefix(b.URL, "https://www.nexmark.com/"), "/")[:3] {
			if len(dir) < 3 || len(dir) > 4 || strings.Contains(dir, " ") {
				t.Fatalf("URL %q: directory %q, want 3 or 4 letters or '_'", b.URL, dir)
			}
		}
	}
	others := len(seen) - numHotChannels
	if frac := float64(withID) / float64(others); frac < 0.85 || frac > 0.95 {
		t.Fatalf("%d of %d channels' URLs have a channel_id, want about 9 in 10", withID, others)
	}
	for c, want := range map[int]int64{0: 0, 1: math.MinInt32, 2: 1 << 30, 3: 1 << 30} {
		if got := channelID(c); got != want {
			t.Errorf("channelID(%d) = %d, want %d", c, got, want)
		}
	}
}

func TestGeneratorChannelURLStable(t *testing.T) {
	g := newGen(t, Config{Seed: 9})
	urls := map[string]string{}
	for i := range int64(20_000) {
		e := g.Event(i)
		if e.Kind != KindBid {
			continue
		}
		if u, ok := urls[e.Bid.Channel]; ok && u != e.Bid.URL {
			t.Fatalf("channel %s has URLs %q and %q", e.Bid.Channel, u, e.Bid.URL)
		}
		urls[e.Bid.Channel] = e.Bid.URL
	}
}

func BenchmarkGenerate(b *testing.B) {
	g := newGen(b, Config{})
	b.ReportAllocs()
	var i int64
	for b.Loop() {
		e := g.Event(i)
		if e.Kind == 0 {
			b.Fatal("no event")
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
