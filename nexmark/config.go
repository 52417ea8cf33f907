package nexmark

import (
	"errors"
	"fmt"
	"time"
)

// The model's fixed shape. They are constants, not options, because every
// published Nexmark figure assumes them and the queries' tests rely on them.
const (
	// FirstPersonID and FirstAuctionID start ids away from zero so that a
	// query joining on ids finds matches even in a short run.
	FirstPersonID  = 1000
	FirstAuctionID = 1000
	// FirstCategoryID and NumCategories keep categories few so that the
	// per-category queries (q4) have several auctions per category.
	FirstCategoryID = 10
	NumCategories   = 5

	// Within every group of TotalProportion consecutive events the first
	// PersonProportion are people, the next AuctionProportion auctions and
	// the rest bids.
	PersonProportion  = 1
	AuctionProportion = 3
	BidProportion     = 46
	TotalProportion   = PersonProportion + AuctionProportion + BidProportion

	// personIDLead and auctionIDLead let a random reference point slightly
	// past the newest person or auction, so that some bids and auctions
	// arrive before what they refer to, as in a real system.
	personIDLead  = 10
	auctionIDLead = 10

	// hotBatch is the batch size from which the hot seller, bidder and
	// auction are taken (the reference generator's HOT_*_RATIO = 100
	// constants): the first id of the newest batch of 100 is the hot one.
	hotBatch = 100
)

// Defaults used when the corresponding Config field is zero.
const (
	DefaultBaseTime            = int64(1767225600000) // 2026-01-01T00:00:00Z
	DefaultEventsPerSecond     = 10_000_000
	DefaultNumActivePeople     = 1000
	DefaultNumInFlightAuctions = 100
	DefaultHotAuctionRatio     = 2
	DefaultHotSellersRatio     = 4
	DefaultHotBiddersRatio     = 4
	DefaultAvgPersonSize       = 200
	DefaultAvgAuctionSize      = 500
	DefaultAvgBidSize          = 100
	DefaultMaxDelay            = 3 * time.Second
)

// ErrConfig is wrapped by every error New returns for an invalid Config.
var ErrConfig = errors.New("nexmark: invalid config")

// Config parameterizes the generator. The zero Config is the standard
// Nexmark setup with seed 0; every zero field takes the default named on it.
type Config struct {
	// Seed selects one of many equally valid event streams. Zero is a seed
	// like any other.
	Seed uint64
	// BaseTime is the event time of event 0, in milliseconds since the Unix
	// epoch. Zero means DefaultBaseTime (2026-01-01), a fixed instant so a
	// run is reproducible; pass the wall clock for a live-looking stream.
	BaseTime int64
	// EventsPerSecond is the event-time rate: event i happens at
	// BaseTime + i/EventsPerSecond. It does not throttle generation. Zero
	// means DefaultEventsPerSecond: 10,000,000, the `tps` of the suite
	// behind Flink's published figures (nexmark.yaml), at which a 10 s
	// window holds 100M events and an auction lasts about a millisecond.
	EventsPerSecond float64
	// NumActivePeople is how many of the newest people bids and auctions
	// pick from at random (default 1,000). Bounding it keeps the number of
	// bids per person steady in long runs.
	NumActivePeople int
	// NumInFlightAuctions is how many of the newest auctions bids pick from
	// at random (default 100); it also sets the average auction length.
	NumInFlightAuctions int
	// HotAuctionRatio, HotSellersRatio and HotBiddersRatio make all but one
	// in N bids go to the hot auction, auctions to the hot seller, and bids
	// come from the hot bidder (defaults 2, 4, 4), which gives the queries
	// skewed keys as the reference does.
	HotAuctionRatio int
	HotSellersRatio int
	HotBiddersRatio int
	// AvgPersonSize, AvgAuctionSize and AvgBidSize are the sizes the
	// Extra field pads each kind to on average (defaults 200, 500 and
	// 100), counted as the reference generator counts them: 8 bytes per
	// number it counts and the length of each string it counts (a bid's
	// channel and URL are not counted, so a bid's Extra averages 68 bytes
	// and a bid's encoding about 170).
	AvgPersonSize  int
	AvgAuctionSize int
	AvgBidSize     int
	// ProbDelayedEvent is the probability that an event is delayed: its
	// DateTime lies up to MaxDelay before its place in the stream, so it
	// arrives out of order. This is the Beam generator's occasional delay
	// (which holds the event back in wall-clock time) expressed in event
	// time, because an index-addressed stream has a fixed order. Zero (or
	// negative) means none: the Flink suite's generator emits events in
	// order. Set it to test lateness (the queries' tests use 0.1).
	ProbDelayedEvent float64
	// MaxDelay bounds a delayed event's lateness (default 3s, the
	// reference's occasionalDelaySec).
	MaxDelay time.Duration
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.BaseTime == 0 {
		c.BaseTime = DefaultBaseTime
	}
	if c.EventsPerSecond == 0 {
		c.EventsPerSecond = DefaultEventsPerSecond
	}
	if c.NumActivePeople == 0 {
		c.NumActivePeople = DefaultNumActivePeople
	}
	if c.NumInFlightAuctions == 0 {
		c.NumInFlightAuctions = DefaultNumInFlightAuctions
	}
	if c.HotAuctionRatio == 0 {
		c.HotAuctionRatio = DefaultHotAuctionRatio
	}
	if c.HotSellersRatio == 0 {
		c.HotSellersRatio = DefaultHotSellersRatio
	}
	if c.HotBiddersRatio == 0 {
		c.HotBiddersRatio = DefaultHotBiddersRatio
	}
	if c.AvgPersonSize == 0 {
		c.AvgPersonSize = DefaultAvgPersonSize
	}
	if c.AvgAuctionSize == 0 {
		c.AvgAuctionSize = DefaultAvgAuctionSize
	}
	if c.AvgBidSize == 0 {
		c.AvgBidSize = DefaultAvgBidSize
	}
	if c.ProbDelayedEvent < 0 {
		c.ProbDelayedEvent = 0
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = DefaultMaxDelay
	}
	return c
}

// validate returns every problem with c (after defaults) at once.
func (c Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	if !(c.EventsPerSecond > 0) || c.EventsPerSecond > 1e9 {
		bad("EventsPerSecond %v must be in (0, 1e9]", c.EventsPerSecond)
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"NumActivePeople", c.NumActivePeople},
		{"NumInFlightAuctions", c.NumInFlightAuctions},
		{"HotAuctionRatio", c.HotAuctionRatio},
		{"HotSellersRatio", c.HotSellersRatio},
		{"HotBiddersRatio", c.HotBiddersRatio},
		{"AvgPersonSize", c.AvgPersonSize},
		{"AvgAuctionSize", c.AvgAuctionSize},
		{"AvgBidSize", c.AvgBidSize},
	} {
		if f.v < 1 {
			bad("%s %d must be positive", f.name, f.v)
		}
	}
	// Sizes bound the per-event scratch buffer; absurd ones are mistakes.
	for _, f := range []struct {
		name string
		v    int
	}{{"AvgPersonSize", c.AvgPersonSize}, {"AvgAuctionSize", c.AvgAuctionSize}, {"AvgBidSize", c.AvgBidSize}} {
		if f.v > maxAvgSize {
			bad("%s %d exceeds %d", f.name, f.v, maxAvgSize)
		}
	}
	if c.ProbDelayedEvent > 1 {
		bad("ProbDelayedEvent %v exceeds 1", c.ProbDelayedEvent)
	}
	if c.MaxDelay < time.Millisecond {
		bad("MaxDelay %v must be at least 1ms", c.MaxDelay)
	}
	return errors.Join(errs...)
}

// maxAvgSize bounds the Avg*Size options (1 MiB).
const maxAvgSize = 1 << 20
