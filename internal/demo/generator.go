package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Generator produces payments at a steady rate: ids "p<n>", accounts
// "acct-<k>", amounts in [-500, 1000]. Every InvalidEvery-th record is a
// malformed payment, to show the dead-letter topic.
type Generator struct {
	Seeds        []string
	Topic        string
	Rate         int // payments per second
	Accounts     int
	InvalidEvery int // 0 = never
	Seed         uint64
	ClientOpts   []kgo.Opt

	produced atomic.Int64
	invalid  atomic.Int64
	failed   atomic.Int64
}

// Produced is the number of records acknowledged so far, valid or not.
func (g *Generator) Produced() int64 { return g.produced.Load() }

// Failed is the number of payments whose produce failed for good; the
// broker may have written them or not (the verifier reads what is there).
func (g *Generator) Failed() int64 { return g.failed.Load() }

// Invalid is the number of malformed payments acknowledged so far.
func (g *Generator) Invalid() int64 { return g.invalid.Load() }

// Run produces until ctx is cancelled, then flushes.
func (g *Generator) Run(ctx context.Context) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(g.Seeds...),
		kgo.DefaultProduceTopic(g.Topic),
		kgo.RecordRetries(1 << 20),
	}, g.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("demo: generator client: %w", err)
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(g.Seed, 0x5eed))
	const tick = 10 * time.Millisecond
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	start := time.Now()
	var n int64
	for {
		select {
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := cl.Flush(flushCtx); err != nil {
				return fmt.Errorf("demo: generator flush: %w", err)
			}
			return nil
		case now := <-ticker.C:
			due := int64(now.Sub(start).Seconds() * float64(g.Rate))
			for ; n < due; n++ {
				r := g.next(rng, n)
				cl.Produce(context.Background(), r, g.promise)
			}
		}
	}
}

func (g *Generator) next(rng *rand.Rand, n int64) *kgo.Record {
	account := fmt.Sprintf("acct-%04d", rng.IntN(g.Accounts))
	var value []byte
	if g.InvalidEvery > 0 && n%int64(g.InvalidEvery) == int64(g.InvalidEvery-1) {
		value = []byte(fmt.Sprintf(`{"id":"p%d","account":%q}`, n, account)) // no amount
	} else {
		value, _ = json.Marshal(struct {
			ID      string `json:"id"`
			Account string `json:"account"`
			Amount  int64  `json:"amount"`
		}{fmt.Sprintf("p%d", n), account, rng.Int64N(1501) - 500})
	}
	return &kgo.Record{Key: []byte(account), Value: value}
}

func (g *Generator) promise(r *kgo.Record, err error) {
	if err != nil {
		g.failed.Add(1)
		return
	}
	g.produced.Add(1)
	if !bytes.Contains(r.Value, []byte(`"amount"`)) {
		g.invalid.Add(1)
	}
}
