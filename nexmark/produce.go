package nexmark

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Topics names the topic each kind of event goes to. An empty name skips
// that kind, so a run of the bid-only queries (q0–q2) need not write the
// people and auctions.
type Topics struct {
	Persons  string
	Auctions string
	Bids     string
	// SideInput is the topic of the side input q13 reads as a global
	// table (SideInput, ProduceSideInput); Produce does not write it.
	SideInput string
	// Partitions is how many partitions the event topics have (0: one),
	// for a query whose sink must know how many tasks write it (q10's
	// files are complete once every task passed them).
	Partitions int
}

// DefaultTopics are the topic names the reference Kafka setup uses.
func DefaultTopics() Topics {
	return Topics{Persons: "person", Auctions: "auction", Bids: "bid", SideInput: "side_input"}
}

// slabSize is the size of the blocks record keys and values are carved
// from: a record's bytes must stay untouched until the broker acknowledged
// it, and one block per few hundred records costs less than one allocation
// each.
const slabSize = 64 << 10

// Produce writes events [0, n) to their topics; see ProduceRange.
func (g *Generator) Produce(ctx context.Context, cl *kgo.Client, topics Topics, n int64) error {
	return g.ProduceRange(ctx, cl, topics, 0, n)
}

// ProduceRange writes events [from, to) to their topics through cl and
// returns once all are acknowledged, with the first failure if any. Keys are
// the person's id, the auction's id and, for a bid, its auction's id (so
// bids and auctions co-partition for the joins), as 8 big-endian bytes like
// serde.Int64; values use the binary serdes; the record timestamp is the
// event's DateTime. Disjoint ranges can be produced concurrently, since
// events depend only on their index.
func (g *Generator) ProduceRange(ctx context.Context, cl *kgo.Client, topics Topics, from, to int64) error {
	if topics == (Topics{}) {
		return errors.New("nexmark: produce: no topics")
	}
	if from < 0 || to < from {
		return fmt.Errorf("nexmark: produce: bad range [%d, %d)", from, to)
	}
	var (
		mu       sync.Mutex
		firstErr error
	)
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
	}
	failed := func() error {
		mu.Lock()
		defer mu.Unlock()
		return firstErr
	}
	var slab []byte
	for i := from; i < to; i++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("nexmark: produce at event %d: %w", i, err)
		}
		if i%1024 == 0 {
			if err := failed(); err != nil {
				break
			}
		}
		e := g.Event(i)
		var topic string
		var key int64
		switch e.Kind {
		case KindPerson:
			topic, key = topics.Persons, e.Person.ID
		case KindAuction:
			topic, key = topics.Auctions, e.Auction.ID
		case KindBid:
			topic, key = topics.Bids, e.Bid.Auction
		}
		if topic == "" {
			continue
		}
		if cap(slab)-len(slab) < 8+maxEncodedSize(&g.cfg) {
			slab = make([]byte, 0, slabSize)
		}
		start := len(slab)
		slab = binary.BigEndian.AppendUint64(slab, uint64(key))
		mid := len(slab)
		var err error
		if slab, err = (eventSerde{}).Serialize(slab, e); err != nil {
			return fmt.Errorf("nexmark: produce event %d: %w", i, err)
		}
		r := &kgo.Record{
			Topic:     topic,
			Key:       slab[start:mid:mid],
			Value:     slab[mid:len(slab):len(slab)],
			Timestamp: time.UnixMilli(e.DateTime()),
		}
		cl.Produce(ctx, r, done)
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("nexmark: produce: flush: %w", err)
	}
	if err := failed(); err != nil {
		return fmt.Errorf("nexmark: produce: %w", err)
	}
	return nil
}

// maxEncodedSize bounds an event's encoding generously (padding is at most
// 1.2 times the average size, plus fixed fields), so that a record never
// outgrows the room left in a slab; if it did, append would still work and
// merely allocate.
func maxEncodedSize(c *Config) int {
	return max(c.AvgPersonSize, c.AvgAuctionSize, c.AvgBidSize)*6/5 + 512
}
