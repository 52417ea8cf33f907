package nexmark

import (
	"math"
	"math/bits"
	"strconv"
)

// Generator produces the Nexmark event stream. It is immutable after New and
// safe for concurrent use: Event(i) depends only on the Config and i.
type Generator struct {
	cfg Config
	// delayUs is the event-time distance between consecutive events.
	delayUs float64
	// auctionHorizon is how many events it takes to create
	// NumInFlightAuctions auctions; auctions last twice that on average.
	auctionHorizon int64
	maxDelayMs     int64
	// channels[c+numHotChannels] is channel c's name and URL (c < 0 a hot
	// channel), drawn once in New: a bid then copies them instead of
	// drawing three random strings (a fifth of a bid's cost).
	channels []channel
	// letters is a seeded block of random lowercase letters that padding
	// is cut from at a random offset: no query reads Extra, and copying
	// costs a tenth of drawing each letter.
	letters []byte
}

// channel is a bid channel's name and URL.
type channel struct{ name, url string }

// lettersSize bounds the padding of one field; larger configured sizes
// fall back to drawing letters.
const lettersSize = 16 << 10

// New validates cfg, fills its defaults and returns a generator. Every
// problem is reported at once, each wrapping ErrConfig.
func New(cfg Config) (*Generator, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &Generator{
		cfg:            cfg,
		delayUs:        1e6 / cfg.EventsPerSecond,
		auctionHorizon: int64(cfg.NumInFlightAuctions) * TotalProportion / AuctionProportion,
		maxDelayMs:     cfg.MaxDelay.Milliseconds(),
		channels:       make([]channel, numHotChannels+numChannels),
	}
	for c := -numHotChannels; c < numChannels; c++ {
		var name string
		if c < 0 {
			name = hotChannel(-1 - c)
		} else {
			name = "channel-" + strconv.Itoa(c)
		}
		g.channels[c+numHotChannels] = channel{name: name, url: string(g.appendChannelURL(nil, c))}
	}
	r := newRNG(cfg.Seed, lettersSalt, 0)
	g.letters = appendExactString(make([]byte, 0, 2*lettersSize), &r, 2*lettersSize)
	return g, nil
}

// Config returns the configuration with defaults filled in.
func (g *Generator) Config() Config { return g.cfg }

// KindOf returns the kind of event i without generating it, so a consumer
// can skip events it does not need cheaply.
func KindOf(i int64) Kind {
	switch r := i % TotalProportion; {
	case i < 0:
		return 0
	case r < PersonProportion:
		return KindPerson
	case r < PersonProportion+AuctionProportion:
		return KindAuction
	default:
		return KindBid
	}
}

// Timestamp is the undelayed event time of event i: BaseTime plus i
// inter-event delays, in milliseconds.
func (g *Generator) Timestamp(i int64) int64 {
	return g.cfg.BaseTime + int64(float64(i)*g.delayUs)/1000
}

// Watermark is a lower bound on the DateTime of every event at index i or
// later: the undelayed time of i less the longest delay. A source replaying
// the stream by index can publish it as its watermark.
func (g *Generator) Watermark(i int64) int64 {
	if g.cfg.ProbDelayedEvent == 0 {
		return g.Timestamp(i)
	}
	return g.Timestamp(i) - g.maxDelayMs
}

// Event returns event i (i ≥ 0). It is a pure function of the Config and i,
// so replaying from any index reproduces the stream; a negative i returns
// the zero Event rather than panicking.
func (g *Generator) Event(i int64) Event {
	var e Event
	g.Fill(&e, i)
	return e
}

// Fill sets *e to event i, as Event does, without copying the event
// through the result (a hot loop reuses one Event).
func (g *Generator) Fill(e *Event, i int64) {
	if i < 0 {
		*e = Event{}
		return
	}
	r := newRNG(g.cfg.Seed, eventSalt, i)
	ts := g.eventTime(i, &r)
	e.Kind = KindOf(i)
	switch e.Kind {
	case KindPerson:
		g.person(&e.Person, i, &r, ts)
	case KindAuction:
		g.auction(&e.Auction, i, &r, ts)
	case KindBid:
		g.bid(&e.Bid, i, &r, ts)
	}
}

// eventTime is event i's DateTime: its place in the stream, or earlier
// for a delayed event. It is the first draw of every event.
func (g *Generator) eventTime(i int64, r *rng) int64 {
	ts := g.Timestamp(i)
	if g.cfg.ProbDelayedEvent > 0 && r.float64() < g.cfg.ProbDelayedEvent {
		ts -= 1 + r.int64N(g.maxDelayMs)
	}
	return ts
}

// lastBase0PersonID is the newest person id (counting from 0) that exists
// at event i; it is i's own id when i is a person.
func lastBase0PersonID(i int64) int64 {
	epoch, off := i/TotalProportion, i%TotalProportion
	if off >= PersonProportion {
		off = PersonProportion - 1
	}
	return epoch*PersonProportion + off
}

// lastBase0AuctionID is the newest auction id (counting from 0) that exists
// at event i; it is i's own id when i is an auction, and -1 before the
// first auction.
func lastBase0AuctionID(i int64) int64 {
	epoch, off := i/TotalProportion, i%TotalProportion
	switch {
	case off < PersonProportion:
		epoch--
		off = AuctionProportion - 1
	case off >= PersonProportion+AuctionProportion:
		off = AuctionProportion - 1
	default:
		off -= PersonProportion
	}
	return epoch*AuctionProportion + off
}

// nextBase0PersonID picks a random person among the NumActivePeople newest,
// or up to personIDLead not created yet.
func (g *Generator) nextBase0PersonID(i int64, r *rng) int64 {
	people := lastBase0PersonID(i) + 1
	active := min(people, int64(g.cfg.NumActivePeople))
	return people - active + r.int64N(active+personIDLead)
}

// nextBase0AuctionID picks a random auction among the NumInFlightAuctions
// newest, or up to auctionIDLead not created yet.
func (g *Generator) nextBase0AuctionID(i int64, r *rng) int64 {
	last := lastBase0AuctionID(i)
	first := max(last-int64(g.cfg.NumInFlightAuctions), 0)
	return first + r.int64N(last-first+1+auctionIDLead)
}

// nextPrice is the reference's price distribution, 10^(6u) dollars in
// cents for uniform u: log-uniform between $1 and $10^6. Exp of a scaled
// argument is the same value as Pow(10, ·) at a third of the cost.
func nextPrice(r *rng) int64 {
	return int64(math.Round(math.Exp(r.float64()*6*math.Ln10) * 100))
}

// The reference vocabularies: few values, so that the filtering queries
// (q3 selects by state) keep a useful fraction. They are functions over
// array literals rather than package variables: eddy keeps no globals.
const (
	numUSStates    = 6
	numUSCities    = 10
	numFirstNames  = 11
	numLastNames   = 9
	numHotChannels = 4
)

func usState(k int) string { return [numUSStates]string{"AZ", "CA", "ID", "OR", "WA", "WY"}[k] }

func usCity(k int) string {
	return [numUSCities]string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}[k]
}

func firstName(k int) string {
	return [numFirstNames]string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}[k]
}

func lastName(k int) string {
	return [numLastNames]string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}[k]
}

// hotChannel names the channels that take half of all bids.
func hotChannel(k int) string {
	return [numHotChannels]string{"Google", "Facebook", "Baidu", "Apple"}[k]
}

// The reference's channel model: half of the bids come through one of the
// hot channels, the rest through one of numChannels others, nine in ten of
// whose URLs carry a channel_id parameter (q21 extracts it).
const (
	hotChannelRatio = 2
	numChannels     = 10_000
	channelIDRatio  = 10
)

// An event's strings are appended to one stack buffer and converted to a
// single string at the end, so that they cost one allocation together; the
// fields are cut from it by their end offsets (ends[n], n = len(b), n+1
// closes a field). The helpers take and return
// the slice (rather than working through a pointer) so that escape analysis
// keeps the buffer on the stack.

// field returns field k of all, whose fields end at ends.
func field(all string, ends []int, k int) string {
	start := 0
	if k > 0 {
		start = ends[k-1]
	}
	return all[start:ends[k]]
}

// appendRandString appends a string of 3 to maxLen-1 lowercase letters with
// about one in thirteen a space, trimmed of outer spaces (the reference's
// nextString).
func appendRandString(b []byte, r *rng, maxLen int) []byte {
	start := len(b)
	b = appendRandChars(b, r, maxLen, ' ')
	end := len(b)
	for end > start && b[end-1] == ' ' {
		end--
	}
	lead := 0
	for start+lead < end && b[start+lead] == ' ' {
		lead++
	}
	copy(b[start:], b[start+lead:end])
	return b[:end-lead]
}

// appendRandChars appends 3 to maxLen-1 characters, each a lowercase letter
// or, one in thirteen, special.
func appendRandChars(b []byte, r *rng, maxLen int, special byte) []byte {
	const minLen = 3
	// Three characters per draw, 21 bits each: the modulo bias of 2^21
	// against 13·26 is below 2^-12, invisible in the queries.
	var x uint64
	for n, k := minLen+r.intN(maxLen-minLen), 0; n > 0; n, k = n-1, k-1 {
		if k == 0 {
			x, k = r.uint64(), 3
		}
		v := x & (1<<21 - 1)
		x >>= 21
		if v%13 == 0 {
			b = append(b, special)
		} else {
			b = append(b, byte('a'+(v/13)%26))
		}
	}
	return b
}

// appendExactString appends n random lowercase letters, eleven per draw:
// 2^64 holds 26^11 about 5,000 times, so the last letter of a draw is
// biased by under 0.02% (thirteen would fit, with 7% bias on the last).
func appendExactString(b []byte, r *rng, n int) []byte {
	for n > 0 {
		x := r.uint64()
		for k := 0; k < 11 && n > 0; k++ {
			b = append(b, byte('a'+x%26))
			x /= 26
			n--
		}
	}
	return b
}

// appendExtra appends padding so that size plus the padding averages avg,
// spread ±20% (the reference's nextExtra), cut from letters.
func appendExtra(b []byte, r *rng, letters []byte, size, avg int) []byte {
	if size > avg {
		return b
	}
	avg -= size
	delta := int(math.Round(float64(avg) * 0.2))
	n := avg - delta
	if delta > 0 {
		n += r.intN(2 * delta)
	}
	if n > lettersSize {
		return appendExactString(b, r, n)
	}
	at := r.intN(len(letters) - n + 1)
	return append(b, letters[at:at+n]...)
}

// scratchSize covers the default sizes on the stack; larger configured
// sizes grow the buffer on the heap.
const scratchSize = 768

// Each kind is drawn in two steps: draw<Kind> sets the numeric fields and
// appends the string fields to a buffer, noting where each ends; then
// <kind> cuts strings from one copy of the buffer (Fill), or the Source
// encodes straight from the buffer (no string at all). Both see the same
// draws in the same order, so both give the same event.

func (g *Generator) drawPerson(p *Person, b []byte, i int64, r *rng, ts int64) ([]byte, [6]int) {
	var ends [6]int
	n := 0
	b = append(b, firstName(r.intN(numFirstNames))...)
	b = append(b, ' ')
	b = append(b, lastName(r.intN(numLastNames))...)
	ends[n], n = len(b), n+1
	b = appendRandString(b, r, 7)
	b = append(b, '@')
	b = appendRandString(b, r, 5)
	b = append(b, ".com"...)
	ends[n], n = len(b), n+1
	for k := range 4 {
		if k > 0 {
			b = append(b, ' ')
		}
		d := r.intN(10000)
		b = append(b, byte('0'+d/1000), byte('0'+d/100%10), byte('0'+d/10%10), byte('0'+d%10))
	}
	ends[n], n = len(b), n+1
	b = append(b, usCity(r.intN(numUSCities))...)
	ends[n], n = len(b), n+1
	b = append(b, usState(r.intN(numUSStates))...)
	ends[n], n = len(b), n+1
	b = appendExtra(b, r, g.letters, 8+len(b), g.cfg.AvgPersonSize)
	ends[n] = len(b)
	*p = Person{ID: lastBase0PersonID(i) + FirstPersonID, DateTime: ts}
	return b, ends
}

func (g *Generator) person(p *Person, i int64, r *rng, ts int64) {
	var scratch [scratchSize]byte
	b, ends := g.drawPerson(p, scratch[:0], i, r, ts)
	all := string(b)
	p.Name = field(all, ends[:], 0)
	p.EmailAddress = field(all, ends[:], 1)
	p.CreditCard = field(all, ends[:], 2)
	p.City = field(all, ends[:], 3)
	p.State = field(all, ends[:], 4)
	p.Extra = field(all, ends[:], 5)
}

func (g *Generator) drawAuction(a *Auction, b []byte, i int64, r *rng, ts int64) ([]byte, [3]int) {
	var seller int64
	if r.intN(g.cfg.HotSellersRatio) > 0 {
		seller = lastBase0PersonID(i) / hotBatch * hotBatch
	} else {
		seller = g.nextBase0PersonID(i, r)
	}
	initial := nextPrice(r)
	// Auctions last twice the time it takes to create NumInFlightAuctions
	// more on average, so about that many are open at any time.
	horizon := g.Timestamp(i+g.auctionHorizon) - g.Timestamp(i)
	length := 1 + r.int64N(max(2*horizon, 1))

	var ends [3]int
	n := 0
	b = appendRandString(b, r, 20)
	ends[n], n = len(b), n+1
	b = appendRandString(b, r, 100)
	ends[n], n = len(b), n+1
	b = appendExtra(b, r, g.letters, 8*6+len(b), g.cfg.AvgAuctionSize)
	ends[n] = len(b)
	reserve := initial + nextPrice(r)
	*a = Auction{
		ID:         lastBase0AuctionID(i) + FirstAuctionID,
		InitialBid: initial,
		Reserve:    reserve,
		DateTime:   ts,
		Expires:    ts + length,
		Seller:     seller + FirstPersonID,
		Category:   FirstCategoryID + int64(r.intN(NumCategories)),
	}
	return b, ends
}

func (g *Generator) auction(a *Auction, i int64, r *rng, ts int64) {
	var scratch [scratchSize]byte
	b, ends := g.drawAuction(a, scratch[:0], i, r, ts)
	all := string(b)
	a.ItemName = field(all, ends[:], 0)
	a.Description = field(all, ends[:], 1)
	a.Extra = field(all, ends[:], 2)
}

func (g *Generator) drawBid(v *Bid, b []byte, i int64, r *rng, ts int64) ([]byte, *channel) {
	var auction, bidder int64
	if r.intN(g.cfg.HotAuctionRatio) > 0 {
		auction = lastBase0AuctionID(i) / hotBatch * hotBatch
	} else {
		auction = g.nextBase0AuctionID(i, r)
	}
	if r.intN(g.cfg.HotBiddersRatio) > 0 {
		// The second of the batch, so hot bidders and hot sellers differ.
		bidder = lastBase0PersonID(i)/hotBatch*hotBatch + 1
	} else {
		bidder = g.nextBase0PersonID(i, r)
	}
	price := nextPrice(r)

	channel := -1 - r.intN(numHotChannels) // hot channels are -1..-4
	if r.intN(hotChannelRatio) == 0 {
		channel = r.intN(numChannels)
	}
	ch := &g.channels[channel+numHotChannels]
	// As in the reference, the channel and URL do not count towards the
	// average size: the padding averages AvgBidSize less 32 bytes. Only the
	// padding is appended to b: the channel's strings are shared.
	b = appendExtra(b, r, g.letters, 8*4, g.cfg.AvgBidSize)
	*v = Bid{Auction: auction + FirstAuctionID, Bidder: bidder + FirstPersonID, Price: price, DateTime: ts}
	return b, ch
}

func (g *Generator) bid(v *Bid, i int64, r *rng, ts int64) {
	var scratch [scratchSize]byte
	b, ch := g.drawBid(v, scratch[:0], i, r, ts)
	v.Channel, v.URL, v.Extra = ch.name, ch.url, string(b)
}

// appendChannelURL appends channel's URL. A channel's URL is fixed for the seed
// (the reference caches one per channel); drawing it from the channel's own
// stream gives the same without a cache. As the reference's, the path's
// three directories are 3 or 4 characters with '_' for the special one, and
// nine in ten of the other channels' URLs end in a channel_id: the
// absolute value of the channel number's bits reversed (as Java's
// Math.abs(Integer.reverse(i)), which leaves the smallest int as it is).
func (g *Generator) appendChannelURL(b []byte, channel int) []byte {
	r := newRNG(g.cfg.Seed, channelSalt, int64(channel))
	b = append(b, "https://www.nexmark.com/"...)
	b = appendRandChars(b, &r, 5, '_')
	b = append(b, '/')
	b = appendRandChars(b, &r, 5, '_')
	b = append(b, '/')
	b = appendRandChars(b, &r, 5, '_')
	b = append(b, "/item.htm?query=1"...)
	if channel >= 0 && r.intN(channelIDRatio) > 0 {
		b = append(b, "&channel_id="...)
		b = strconv.AppendInt(b, channelID(channel), 10)
	}
	return b
}

// channelID is the reference's channel_id of channel c (0 ≤ c < 2^31).
func channelID(c int) int64 {
	v := int32(bits.Reverse32(uint32(c)))
	if v < 0 && v != math.MinInt32 {
		v = -v
	}
	return int64(v)
}
