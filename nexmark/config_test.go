package nexmark

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewConfigErrors(t *testing.T) {
	_, err := New(Config{EventsPerSecond: -1, HotAuctionRatio: -2, AvgBidSize: 1 << 30, ProbDelayedEvent: 2})
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("err %v, want ErrConfig", err)
	}
	for _, want := range []string{"EventsPerSecond", "HotAuctionRatio", "AvgBidSize", "ProbDelayedEvent"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
	if g := newGen(t, Config{}); g.Event(-1).Kind != 0 {
		t.Fatal("negative index gave an event")
	}
}

func TestConfigDefaults(t *testing.T) {
	c := newGen(t, Config{}).Config()
	if c.BaseTime != DefaultBaseTime || c.EventsPerSecond != DefaultEventsPerSecond ||
		c.NumActivePeople != 1000 || c.NumInFlightAuctions != 100 ||
		c.HotAuctionRatio != 2 || c.HotSellersRatio != 4 || c.HotBiddersRatio != 4 ||
		c.AvgPersonSize != 200 || c.AvgAuctionSize != 500 || c.AvgBidSize != 100 ||
		c.ProbDelayedEvent != 0 || c.MaxDelay != 3*time.Second {
		t.Fatalf("defaults %+v", c)
	}
	if c := newGen(t, Config{ProbDelayedEvent: -1}).Config(); c.ProbDelayedEvent != 0 {
		t.Fatalf("negative ProbDelayedEvent kept delays: %v", c.ProbDelayedEvent)
	}
}
